//! Exec credential plugins (kubeconfig's `users[].user.exec`), run as client-go runs them.

mod config;
mod error;

pub use config::{ExecApiVersion, ExecCluster, ExecConfig, ExecEnvVar, UnsupportedApiVersion};
pub use error::{BadExecOutput, ExecError, ExecFailure};
