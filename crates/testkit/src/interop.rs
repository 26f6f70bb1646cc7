//! The Go interop programs under `e2e/interop/<name>/`: real client-go consumers a test runs
//! against the harness, to show that what Tether (or a fixture) publishes works for a client
//! other than Tether. `hack/interop.sh` builds them with the machine's Go and caches them in
//! `<repo>/.interop/bin/`, rebuilding one only when its sources change.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::assets::repo_root;

/// The path of the interop program `name` (the directory name under `e2e/interop/`), built
/// first by `hack/interop.sh <name>` if it is missing or stale.
///
/// The script, not this function, decides whether to build, so a test and `hack/test.sh` share
/// one cache and one lock, and a test never runs a binary older than its sources. A first
/// build on a cold Go cache takes minutes (client-go); later calls take milliseconds.
///
/// # Errors
/// If the script fails (its stderr is in the error, e.g. no Go, or a compile error), prints
/// something other than a directory, or that directory lacks the program.
pub fn binary(name: &str) -> Result<PathBuf> {
    let script = repo_root().join("hack/interop.sh");
    let out = Command::new(&script)
        .arg(name)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{} {name} failed ({}):\n{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    let dir = String::from_utf8(out.stdout)
        .context("hack/interop.sh printed a non-UTF-8 path")?
        .trim()
        .to_owned();
    let path = PathBuf::from(dir).join(name);
    if !path.is_file() {
        bail!(
            "hack/interop.sh {name} succeeded but {} does not exist",
            path.display()
        );
    }
    Ok(path)
}
