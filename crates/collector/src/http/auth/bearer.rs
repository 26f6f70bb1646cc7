//! The caller's bearer token, read from the `Authorization` header.

use http::{HeaderMap, header::AUTHORIZATION};
use secrecy::SecretString;

/// Longer tokens are refused unread: a real ServiceAccount or OIDC token is a few KiB.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Why a request carries no usable bearer token (401). Never holds the header's value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum BearerError {
    /// No `Authorization` header.
    #[error("no bearer token")]
    Missing,
    /// Several headers, another scheme, an empty, oversized or non-ASCII token.
    #[error("malformed Authorization header")]
    Malformed,
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive, RFC 7235).
pub(crate) fn bearer_token(headers: &HeaderMap) -> Result<SecretString, BearerError> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next().ok_or(BearerError::Missing)?;
    if values.next().is_some() || value.len() > MAX_TOKEN_BYTES + "Bearer ".len() {
        return Err(BearerError::Malformed);
    }
    let text = value.to_str().map_err(|_| BearerError::Malformed)?;
    let (scheme, token) = text.split_once(' ').ok_or(BearerError::Malformed)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.contains(' ') {
        return Err(BearerError::Malformed);
    }
    Ok(SecretString::from(token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use rstest::rstest;
    use secrecy::ExposeSecret as _;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[rstest]
    #[case("Bearer abc", "abc")]
    #[case("bearer abc", "abc")]
    #[case("BEARER  abc ", "abc")]
    fn reads_the_token(#[case] value: &str, #[case] token: &str) {
        let read = bearer_token(&headers(&[value])).unwrap();
        assert_eq!(read.expose_secret(), token);
    }

    #[rstest]
    #[case(&[], BearerError::Missing)]
    #[case(&["Basic dXNlcjpwdw=="], BearerError::Malformed)]
    #[case(&["Bearer"], BearerError::Malformed)]
    #[case(&["Bearer "], BearerError::Malformed)]
    #[case(&["Bearer a b"], BearerError::Malformed)]
    #[case(&["Bearer a", "Bearer b"], BearerError::Malformed)]
    fn refuses(#[case] values: &[&str], #[case] why: BearerError) {
        assert_eq!(bearer_token(&headers(values)).unwrap_err(), why);
    }

    #[test]
    fn refuses_an_oversized_token_unread() {
        let value = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        let refused = bearer_token(&headers(&[&value])).unwrap_err();
        assert_eq!(refused, BearerError::Malformed);
    }
}
