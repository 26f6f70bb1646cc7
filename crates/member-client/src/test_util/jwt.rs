//! [`jwt`]: a token with claims, as the apiserver's issuer writes one.

use base64::Engine as _;

/// A JWT whose payload is `claims` (JSON), with a dummy signature: the client reads a token's
/// claims (its `exp`) but never checks a signature, which is the apiserver's job.
pub fn jwt(claims: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!("{}.{}.c2ln", b64(r#"{"alg":"RS256"}"#), b64(claims))
}
