//! Where `/proc` keeps a process the tests started, by the PID `Child::id` gave.
//!
//! `/proc` may belong to an outer PID namespace (a runner that starts the tests with
//! `unshare --pid` and keeps the host's `/proc`); the collector's process table already
//! finds a process by the PID our namespace gives it, so the harness asks it.

use std::path::PathBuf;

use anyhow::{Context as _, Result};

/// `/proc/<n>` for the process our namespace calls `pid`; `None` when it is gone.
pub fn proc_dir(pid: u32) -> Option<PathBuf> {
    member_client::exec::proc_dir(i32::try_from(pid).ok()?)
}

/// `/proc/<n>/<file>` of `pid` as [`proc_dir`] finds it, read as text; empty when gone.
pub fn proc_file(pid: u32, file: &str) -> String {
    proc_dir(pid)
        .and_then(|dir| std::fs::read_to_string(dir.join(file)).ok())
        .unwrap_or_default()
}

/// A size line of `pid`'s `/proc/<n>/status` (`VmRSS`, `VmHWM`, …), in bytes.
///
/// # Errors
/// The process is gone, or its status has no such line.
pub fn proc_status_bytes(pid: u32, key: &str) -> Result<u64> {
    let kib = proc_file(pid, "status")
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next()?.parse::<u64>().ok());
    kib.map(|kib| kib * 1024)
        .with_context(|| format!("no {key} in /proc/<{pid}>/status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_found_by_its_own_pid() {
        let status = proc_file(std::process::id(), "status");
        let nspid = status.lines().find_map(|line| line.strip_prefix("NSpid:"));
        let own = nspid.and_then(|ids| ids.split_whitespace().last());
        assert_eq!(own, Some(std::process::id().to_string().as_str()));
        let rss = proc_status_bytes(std::process::id(), "VmRSS").unwrap();
        assert!(rss > 0 && rss.is_multiple_of(1024), "{rss}");
        assert!(proc_status_bytes(std::process::id(), "NoSuchLine").is_err());
    }
}
