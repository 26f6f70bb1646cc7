//! Runs a `hack/*.sh` builder that prints a bin directory ([`crate::interop`],
//! [`crate::tools`]) and finds one program in it.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::assets::repo_root;

/// `hack/<script>`, to run with [`printed_dir`].
pub(crate) fn hack_script(script: &str) -> Command {
    Command::new(repo_root().join("hack").join(script))
}

/// Runs `script`, a `hack/*.sh` builder, and returns the directory it prints.
///
/// # Errors
/// If the script fails (its stderr and `advice` are in the error) or prints a non-UTF-8 path.
pub(crate) fn printed_dir(mut script: Command, advice: &str) -> Result<PathBuf> {
    let what = (std::iter::once(script.get_program()).chain(script.get_args()))
        .map(|part| part.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let out = script.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}){advice}:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    let dir = String::from_utf8(out.stdout)
        .with_context(|| format!("{what} printed a non-UTF-8 path"))?;
    Ok(PathBuf::from(dir.trim()))
}

/// Runs `hack/<script> <name>` and returns `<printed dir>/<name>`.
///
/// The script, not the caller, decides whether to build, so a test and `hack/test.sh` share
/// one cache and one lock, and a test never runs a binary older than its inputs.
///
/// # Errors
/// If the script fails (its stderr is in the error), prints something other than a
/// directory, or that directory lacks `name`.
pub(crate) fn built_binary(script: &str, name: &str) -> Result<PathBuf> {
    let mut command = hack_script(script);
    command.arg(name);
    let binary = printed_dir(command, "")?.join(name);
    if !binary.is_file() {
        bail!(
            "hack/{script} {name} succeeded but {} does not exist",
            binary.display()
        );
    }
    Ok(binary)
}
