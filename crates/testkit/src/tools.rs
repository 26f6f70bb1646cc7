//! The pinned Go tools the tests run (`helm`, `kustomize`, `promtool`): `hack/tools.sh` builds
//! each from its wrapper module `hack/tools/<name>/` with the machine's Go and caches it in
//! `<repo>/.tools/bin/`, rebuilding one only when its wrapper changes. Tests take them from
//! here rather than from `PATH`, so every machine runs the same versions.

use std::path::PathBuf;

use anyhow::Result;

use crate::hack_script::built_binary;

/// The path of the tool `name` (the directory name under `hack/tools/`), built first by
/// `hack/tools.sh <name>` if it is missing or stale.
///
/// A first build on a cold Go cache takes minutes (helm alone about four on two cores);
/// later calls take milliseconds. `hack/test.sh` builds every tool before the tests, so the
/// tests' own calls find them built.
///
/// # Errors
/// If the script fails (its stderr is in the error, e.g. no Go, or no proxy on a cold module
/// cache), prints something other than a directory, or that directory lacks the tool.
pub fn binary(name: &str) -> Result<PathBuf> {
    built_binary("tools.sh", name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::*;

    #[test]
    fn an_unknown_tool_is_an_error_that_names_it() {
        // The script refuses before looking for Go, so this needs no toolchain.
        let err = binary("no-such-tool").unwrap_err();
        assert!(
            format!("{err:#}").contains("no tool hack/tools/no-such-tool"),
            "{err:#}"
        );
    }
}
