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

/// How many established TCP connections `pid` holds to `remote_port` (on any address): its
/// socket inodes (`/proc/<n>/fd`) matched against its network namespace's table
/// (`/proc/<n>/net/tcp` and `tcp6`), so that other processes' connections do not count.
pub fn established_connections(pid: u32, remote_port: u16) -> usize {
    let Some(dir) = proc_dir(pid) else {
        return 0;
    };
    let inodes: std::collections::HashSet<String> = std::fs::read_dir(dir.join("fd"))
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let target = std::fs::read_link(entry.ok()?.path()).ok()?;
            let target = target.to_str()?;
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    let port = format!("{remote_port:04X}");
    ["net/tcp", "net/tcp6"]
        .iter()
        .flat_map(|table| {
            proc_file(pid, table)
                .lines()
                .skip(1)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local, remote, state ("01": established), ..., inode (the tenth field).
            let (Some(remote), Some(state), Some(inode)) =
                (fields.get(2), fields.get(3), fields.get(9))
            else {
                return false;
            };
            *state == "01"
                && remote.rsplit(':').next() == Some(port.as_str())
                && inodes.contains(*inode)
        })
        .count()
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

    #[test]
    fn established_connections_are_this_processs_own_to_that_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let pid = std::process::id();
        assert_eq!(established_connections(pid, port), 0);
        let held: Vec<_> = (0..3)
            .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        let accepted: Vec<_> = (0..3).map(|_| listener.accept().unwrap()).collect();
        // The accepted ends are this process's too, but their remote port is the client's.
        assert_eq!(established_connections(pid, port), 3);
        drop((held, accepted));
    }
}
