//! The Go interop programs under `e2e/interop/<name>/`: real client-go consumers a test runs
//! against the harness, to show that what Tether (or a fixture) publishes works for a client
//! other than Tether. `hack/interop.sh` builds them with the machine's Go and caches them in
//! `<repo>/.interop/bin/`, rebuilding one only when its sources change.

use std::path::PathBuf;

use anyhow::Result;

use crate::hack_script::built_binary;

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
    built_binary("interop.sh", name)
}
