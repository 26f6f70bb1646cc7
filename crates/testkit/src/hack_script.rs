//! Runs a `hack/*.sh` builder that prints a bin directory ([`crate::interop`],
//! [`crate::tools`]) and finds one program in it.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::assets::repo_root;

/// Runs `hack/<script> <name>` and returns `<printed dir>/<name>`.
///
/// The script, not the caller, decides whether to build, so a test and `hack/test.sh` share
/// one cache and one lock, and a test never runs a binary older than its inputs.
///
/// # Errors
/// If the script fails (its stderr is in the error), prints something other than a
/// directory, or that directory lacks `name`.
pub(crate) fn built_binary(script: &str, name: &str) -> Result<PathBuf> {
    let path = repo_root().join("hack").join(script);
    let out = Command::new(&path)
        .arg(name)
        .output()
        .with_context(|| format!("running {}", path.display()))?;
    if !out.status.success() {
        bail!(
            "{} {name} failed ({}):\n{}",
            path.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    let dir = String::from_utf8(out.stdout)
        .with_context(|| format!("hack/{script} printed a non-UTF-8 path"))?
        .trim()
        .to_owned();
    let binary = PathBuf::from(dir).join(name);
    if !binary.is_file() {
        bail!(
            "hack/{script} {name} succeeded but {} does not exist",
            binary.display()
        );
    }
    Ok(binary)
}
