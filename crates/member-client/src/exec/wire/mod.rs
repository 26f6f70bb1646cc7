//! The ExecCredential wire format of client-go's exec credential plugins ([KEP-541]), in both
//! directions and both versions (`client.authentication.k8s.io/v1` and `/v1beta1`).
//!
//! Two sides speak it, and both use this module:
//! - Tether as the client that runs a plugin ([`run`](super::run)): it writes
//!   [`ExecInfo::to_json`] into [`EXEC_INFO_ENV`] and reads the plugin's stdout with
//!   [`ExecOutput::from_json`].
//! - `tether-credential` as a plugin that client-go runs: it reads [`ExecInfo::from_json`] and
//!   prints [`ExecOutput::to_json`].
//!
//! What is read is hostile. Errors name fields and never quote a token or a key; `Debug` of
//! [`ExecOutput`] never shows them; the token must fit an HTTP header and
//! [`Credential::MAX_TOKEN_BYTES`](crate::Credential::MAX_TOKEN_BYTES); times are read as
//! client-go reads them ([`parse_rfc3339`]).
//!
//! ```
//! use member_client::{Credential, exec::wire::ExecOutput, exec::ExecApiVersion};
//! use secrecy::ExposeSecret as _;
//!
//! let credential = Credential::from_token_bytes(b"tok-1")?;
//! let printed = ExecOutput::of_credential(&credential, None).to_json(ExecApiVersion::V1)?;
//! let read = ExecOutput::from_json(printed.expose_secret(), ExecApiVersion::V1)?;
//! assert_eq!(read.token.unwrap().expose_secret(), "tok-1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [KEP-541]: https://github.com/kubernetes/enhancements/tree/master/keps/sig-auth/541-external-credential-providers

use std::str::FromStr;

use crate::Text;

mod cluster;
mod exec_credential;
mod exec_credential_write;
mod exec_info;
mod timestamp;

pub use cluster::ExecCluster;
pub use exec_credential::ExecOutput;
pub use exec_credential_write::WriteError;
pub use exec_info::{EXEC_INFO_ENV, ExecInfo, ExecInfoError};
pub use timestamp::{format_rfc3339, parse_rfc3339};

/// The `kind` of every document of this format.
pub const KIND: &str = "ExecCredential";

/// The `client.authentication.k8s.io` version of the ExecCredential exchanged with a plugin.
///
/// `v1alpha1` is gone from client-go, so it is refused here too.
///
/// ```
/// use member_client::exec::ExecApiVersion;
/// let v: ExecApiVersion = "client.authentication.k8s.io/v1beta1".parse().unwrap();
/// assert_eq!(v, ExecApiVersion::V1Beta1);
/// assert!("client.authentication.k8s.io/v1alpha1".parse::<ExecApiVersion>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, strum::Display, strum::IntoStaticStr)]
pub enum ExecApiVersion {
    /// `client.authentication.k8s.io/v1`.
    #[strum(to_string = "client.authentication.k8s.io/v1")]
    V1,
    /// `client.authentication.k8s.io/v1beta1`.
    #[strum(to_string = "client.authentication.k8s.io/v1beta1")]
    V1Beta1,
}

impl ExecApiVersion {
    /// The `apiVersion` string.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl FromStr for ExecApiVersion {
    type Err = UnsupportedApiVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::V1, Self::V1Beta1]
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnsupportedApiVersion {
                given: Text::new(s),
            })
    }
}

/// An exec `apiVersion` other than `client.authentication.k8s.io/v1` or `/v1beta1`.
/// Permanent until the member definition changes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "exec apiVersion \"{given}\" is not supported; use client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1"
)]
pub struct UnsupportedApiVersion {
    /// What the definition says.
    pub given: Text,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::v1("client.authentication.k8s.io/v1", Some(ExecApiVersion::V1))]
    #[case::v1beta1("client.authentication.k8s.io/v1beta1", Some(ExecApiVersion::V1Beta1))]
    #[case::v1alpha1_is_gone("client.authentication.k8s.io/v1alpha1", None)]
    #[case::bare_version("v1", None)]
    #[case::other_group("authentication.k8s.io/v1", None)]
    #[case::padded(" client.authentication.k8s.io/v1", None)]
    #[case::empty("", None)]
    fn api_version_parses_only_v1_and_v1beta1(
        #[case] raw: &str,
        #[case] want: Option<ExecApiVersion>,
    ) {
        assert_eq!(raw.parse::<ExecApiVersion>().ok(), want);
        if let Some(version) = want {
            assert_eq!(version.as_str(), raw);
        }
    }

    #[test]
    fn unsupported_api_version_is_one_sanitized_line() {
        let err = "x/v9\nforged".parse::<ExecApiVersion>().unwrap_err();
        let text = err.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains("x/v9 forged"), "{text}");
    }
}
