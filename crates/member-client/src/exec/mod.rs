//! Exec credential plugins (kubeconfig's `users[].user.exec`), run as client-go runs them.
//!
//! A plugin is a program that prints an `ExecCredential` (`client.authentication.k8s.io/v1`
//! or `v1beta1`, [KEP-541]) holding a bearer token or a client certificate and key. Start
//! with [`run`]: it checks the [`ExecConfig`] against the operator's [`ExecPolicy`], runs the
//! plugin under a deadline and returns an [`ExecOutput`] or an [`ExecError`].
//!
//! # Guarantees
//! - The operator owns the invocation. A member definition cannot run a program the operator
//!   did not declare: the command must resolve, symlinks and all, to a file declared with
//!   `--exec-plugins` or given with `--allow-exec`; and it may pass only the arguments and
//!   variables that plugin's [`PluginDeclaration`] accepts, each matching its pattern (by
//!   default none). Nothing is started until the checks pass ([`ExecPolicy::check`]).
//! - The plugin's environment is built from nothing: a minimal `PATH`, a private `HOME`, the
//!   declared variables, the accepted definition variables and `KUBERNETES_EXEC_INFO`; never
//!   the collector's environment. With `--exec-run-as` it runs as another user
//!   ([`RunAs`]), who cannot read files only the collector's user may (its ServiceAccount
//!   token).
//! - A run ends by [`ExecPolicy::timeout`], whatever the plugin does: at the deadline its whole
//!   process group is killed.
//! - Memory is bounded: at most [`ExecPolicy::MAX_STDOUT`] of stdout and
//!   [`ExecPolicy::MAX_STDERR`] of stderr are held.
//! - Errors never quote stdout, and `Debug` never prints tokens, keys or env values.
//!
//! The ExecCredential format itself, both ways, is [`wire`]'s.
//!
//! Not promised: what an allowed plugin does with the arguments its declaration accepts.
//! Patterns should accept values, not options that name files or programs.
//!
//! ```no_run
//! # async fn doc() -> Result<(), member_client::exec::ExecError> {
//! use member_client::{exec::ExecConfig, exec::ExecPolicy, exec};
//!
//! let policy = ExecPolicy::new(["/usr/local/bin/cloud-auth".into()]);
//! let config = ExecConfig {
//!     args: vec!["token".to_owned()],
//!     ..ExecConfig::new("cloud-auth")
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
#[cfg(all(feature = "exec", unix))]
mod descendants;
mod error;
mod plugin_declaration;
mod plugin_file;
mod policy;
#[cfg(all(feature = "exec", unix))]
mod private_home;
#[cfg(all(feature = "exec", unix))]
mod process_table;
mod refused_env;
// Without the `exec` feature (or off unix), `run` refuses every plugin: nothing here spawns a
// process, and rustix is not built.
#[cfg_attr(not(all(feature = "exec", unix)), path = "run_refused.rs")]
mod run;
pub mod wire;

pub use config::{ExecConfig, ExecEnvVar};
pub use error::{BadExecOutput, ExecError, ExecFailure};
pub use plugin_declaration::{
    ArgRule, DeclarationError, DefinitionRules, EnvRule, Pattern, PluginDeclaration,
};
pub use plugin_file::{ExecPluginsFile, ExecPluginsFileError, MAX_EXEC_PLUGINS_FILE_BYTES};
pub use policy::{ExecPolicy, RunAs};
#[cfg(all(feature = "exec", unix))]
pub use process_table::proc_dir;
#[cfg(all(feature = "exec", unix))]
pub use run::PLUGIN_PATH;
pub use run::run;
pub use wire::{ExecApiVersion, ExecCluster, ExecOutput, UnsupportedApiVersion};

#[cfg(test)]
mod tests;
