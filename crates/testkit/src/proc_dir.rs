//! Where `/proc` keeps a process the tests started, by the PID `Child::id` gave.
//!
//! `/proc` may belong to an outer PID namespace (a runner that starts the tests with
//! `unshare --pid` and keeps the host's `/proc`): `/proc/<pid>` is then some other process,
//! or none, and a test reading it would measure the wrong thing or pass for nothing. Each
//! `status` file's `NSpid` line lists a process's PIDs from `/proc`'s namespace down to its
//! own; the entry at our depth is the PID we know.

use std::path::PathBuf;

fn ns_pids(status: &str) -> Vec<u32> {
    (status.lines())
        .find_map(|line| line.strip_prefix("NSpid:"))
        .map(|ids| {
            ids.split_whitespace()
                .map_while(|id| id.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `/proc/<n>` for the process our namespace calls `pid`; `None` when it is gone.
pub fn proc_dir(pid: u32) -> Option<PathBuf> {
    let own = ns_pids(&std::fs::read_to_string("/proc/self/status").ok()?);
    let depth = own.len().checked_sub(1)?;
    if depth == 0 {
        let dir = PathBuf::from(format!("/proc/{pid}"));
        return dir.exists().then_some(dir);
    }
    std::fs::read_dir("/proc").ok()?.find_map(|entry| {
        let dir = entry.ok()?.path();
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        (ns_pids(&status).get(depth) == Some(&pid)).then_some(dir)
    })
}

/// `/proc/<n>/<file>` of `pid` as [`proc_dir`] finds it, read as text; empty when gone.
pub fn proc_file(pid: u32, file: &str) -> String {
    proc_dir(pid)
        .and_then(|dir| std::fs::read_to_string(dir.join(file)).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_pids_are_listed_outermost_first() {
        assert_eq!(ns_pids("Name:\tx\nNSpid:\t4200\t12\n"), vec![4200, 12]);
        assert_eq!(ns_pids("Name:\tx\n"), Vec::<u32>::new());
    }

    #[test]
    fn this_process_is_found_by_its_own_pid() {
        let dir = proc_dir(std::process::id()).expect("our own /proc directory");
        let status = std::fs::read_to_string(dir.join("status")).unwrap();
        assert_eq!(ns_pids(&status).last(), Some(&std::process::id()));
    }

    #[test]
    fn a_reaped_child_has_none() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(proc_dir(pid), None);
    }
}
