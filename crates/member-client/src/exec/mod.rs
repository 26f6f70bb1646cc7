//! Exec credential plugins (kubeconfig's `users[].user.exec`), run as client-go runs them.

mod config;
mod error;
mod exec_credential;
mod exec_info;
mod policy;
mod refused_env;
mod timestamp;

pub use config::{ExecApiVersion, ExecCluster, ExecConfig, ExecEnvVar, UnsupportedApiVersion};
pub use error::{BadExecOutput, ExecError, ExecFailure};
pub use exec_credential::ExecOutput;
pub use policy::ExecPolicy;
