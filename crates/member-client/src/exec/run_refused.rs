//! `run` in a build without exec support (the `exec` feature is off, or the target is not
//! unix): every plugin is refused before anything is started.

use crate::Text;

use super::{ExecConfig, ExecError, ExecFailure, ExecOutput, ExecPolicy};

/// Refuses `config`'s plugin: this build runs no exec plugins.
///
/// # Errors
/// Always [`ExecError::Failed`] with [`ExecFailure::Spawn`], whose message names the feature.
#[allow(clippy::unused_async)] // the signature of the real `run`, which awaits the plugin
pub async fn run(config: &ExecConfig, _policy: &ExecPolicy) -> Result<ExecOutput, ExecError> {
    Err(ExecFailure::Spawn(Text::new(&format!(
        "exec plugin \"{}\" was not run: this build of member-client has no exec support (its `exec` feature, unix only)",
        Text::new(&config.command)
    )))
    .into())
}
