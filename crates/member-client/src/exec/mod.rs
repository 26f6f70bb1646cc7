//! Exec credential plugins (kubeconfig's `users[].user.exec`), run as client-go runs them.
//!
//! A plugin is a program that prints an `ExecCredential` (`client.authentication.k8s.io/v1`
//! or `v1beta1`, [KEP-541]) holding a bearer token or a client certificate and key. Start
//! with [`run`]: it checks the [`ExecConfig`] against the operator's [`ExecPolicy`], runs the
//! plugin under a deadline and returns an [`ExecOutput`] or an [`ExecError`].
//!
//! # Guarantees
//! - A member definition cannot run a program the operator did not allow: the command must
//!   resolve, symlinks and all, to a file given with `--allow-exec`, and variables that make
//!   a program load other code (`LD_PRELOAD`, `PATH`, `BASH_ENV`, …) are refused
//!   ([`ExecPolicy::check`]). Nothing is started until both checks pass.
//! - A run ends by [`ExecPolicy::timeout`], whatever the plugin does: at the deadline its whole
//!   process group is killed.
//! - Memory is bounded: at most [`ExecPolicy::MAX_STDOUT`] of stdout and
//!   [`ExecPolicy::MAX_STDERR`] of stderr are held.
//! - Errors never quote stdout, and `Debug` never prints tokens, keys or env values.
//!
//! Not promised: what an allowed plugin does with its arguments. Allow only plugins that
//! cannot be told to run other programs.
//!
//! ```no_run
//! # async fn doc() -> Result<(), member_client::ExecError> {
//! use member_client::{ExecApiVersion, ExecConfig, ExecPolicy, exec};
//!
//! let policy = ExecPolicy::new(["/usr/local/bin/cloud-auth".into()]);
//! let config = ExecConfig {
//!     command: "cloud-auth".to_owned(),
//!     args: vec!["token".to_owned()],
//!     env: vec![],
//!     api_version: ExecApiVersion::V1,
//!     provide_cluster_info: false,
//!     cluster: None,
//! };
//! match exec::run(&config, &policy).await {
//!     Ok(output) => println!("expires at {:?}", output.expires_at),
//!     Err(err) => println!("{}: {err}", err.condition_reason()),
//! }
//! # Ok(()) }
//! ```
//!
//! [KEP-541]: https://github.com/kubernetes/enhancements/tree/master/keps/sig-auth/541-external-credential-providers

mod config;
mod error;
mod exec_credential;
mod exec_info;
mod policy;
mod refused_env;
mod run;
mod timestamp;

pub use config::{ExecApiVersion, ExecCluster, ExecConfig, ExecEnvVar, UnsupportedApiVersion};
pub use error::{BadExecOutput, ExecError, ExecFailure};
pub use exec_credential::ExecOutput;
pub use policy::ExecPolicy;
pub use run::run;

#[cfg(test)]
mod tests;
