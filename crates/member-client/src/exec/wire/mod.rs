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
//! use member_client::{Credential, exec::wire::ExecOutput, ExecApiVersion};
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

mod api_version;
mod cluster;
mod exec_credential;
mod exec_credential_write;
mod exec_info;
mod timestamp;

pub use api_version::{ExecApiVersion, UnsupportedApiVersion};
pub use cluster::ExecCluster;
pub use exec_credential::ExecOutput;
pub use exec_credential_write::WriteError;
pub use exec_info::{EXEC_INFO_ENV, ExecInfo, ExecInfoError};
pub use timestamp::{format_rfc3339, parse_rfc3339};

/// The `kind` of every document of this format.
pub const KIND: &str = "ExecCredential";
