//! The processes `/proc` lists, with their IDs as the collector's own PID namespace numbers
//! them.
//!
//! `/proc` may belong to another PID namespace than the collector: a sandbox or CI runner
//! that starts the collector with `unshare --pid` but keeps the outer `/proc` is one. Its
//! directory names, `stat` and `PPid` then count in the outer namespace, while `getpid`,
//! `kill` and `waitpid` count in ours, and `getsid` reads 0 for a session led from outside.
//! So every ID here comes from `status`'s `NSpid`, `NSpgid` and `NSsid` lines, which list a
//! process's IDs from `/proc`'s namespace down to its own: the entry at our depth is ours.

use std::path::{Path, PathBuf};

/// One process, its IDs in the collector's PID namespace (0: not visible there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Process {
    pub pid: i32,
    /// Whether its parent is the collector.
    pub child_of_collector: bool,
    pub pgid: i32,
    pub sid: i32,
    /// Exited, waiting to be reaped.
    pub zombie: bool,
}

/// The collector as `/proc` sees it.
struct Collector {
    /// Its PID in `/proc`'s namespace, which is what `PPid` counts in.
    proc_pid: i32,
    /// How many namespaces below `/proc`'s ours is: the index of our entry in `NS*` lines.
    depth: usize,
    /// Its session in our namespace; 0 when the session's leader is outside it.
    sid: i32,
}

/// One `/proc/<pid>/status`, the fields we read.
#[derive(Default)]
struct Status {
    state: Option<char>,
    ppid: Option<i32>,
    ns_pid: Vec<i32>,
    ns_pgid: Vec<i32>,
    ns_sid: Vec<i32>,
}

impl Status {
    fn read(dir: &str) -> Option<Self> {
        let text = std::fs::read_to_string(format!("/proc/{dir}/status")).ok()?;
        Some(Self::parse(&text))
    }

    fn parse(text: &str) -> Self {
        let ids = |value: &str| -> Vec<i32> {
            (value.split_whitespace())
                .map_while(|id| id.parse().ok())
                .collect()
        };
        let mut status = Self::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            match key {
                "State" => status.state = value.trim_start().chars().next(),
                "PPid" => status.ppid = value.trim().parse().ok(),
                "NSpid" => status.ns_pid = ids(value),
                "NSpgid" => status.ns_pgid = ids(value),
                "NSsid" => status.ns_sid = ids(value),
                _ => {}
            }
        }
        status
    }
}

fn collector() -> Option<Collector> {
    let status = Status::read("self")?;
    let depth = status.ns_pid.len().checked_sub(1)?;
    Some(Collector {
        proc_pid: *status.ns_pid.first()?,
        depth,
        sid: status.ns_sid.get(depth).copied().unwrap_or(0),
    })
}

fn process(status: &Status, collector: &Collector) -> Option<Process> {
    let at = |ids: &[i32]| ids.get(collector.depth).copied();
    Some(Process {
        // Absent when the process lives outside our namespace: never one of ours.
        pid: at(&status.ns_pid).filter(|&pid| pid > 0)?,
        child_of_collector: status.ppid? == collector.proc_pid,
        pgid: at(&status.ns_pgid).unwrap_or(0),
        sid: at(&status.ns_sid).unwrap_or(0),
        zombie: status.state == Some('Z'),
    })
}

/// Every process `/proc` lists, by its directory name, and the collector; `None` when `/proc`
/// cannot be read or does not show the collector.
fn statuses() -> Option<(Collector, impl Iterator<Item = (String, Status)>)> {
    let collector = collector()?;
    let dir = std::fs::read_dir("/proc").ok()?;
    let statuses = dir.filter_map(|entry| {
        let name = entry.ok()?.file_name().into_string().ok()?;
        name.bytes().all(|b| b.is_ascii_digit()).then_some(())?;
        let status = Status::read(&name)?;
        Some((name, status))
    });
    Some((collector, statuses))
}

/// Every process visible in both `/proc` and our namespace; empty when `/proc` cannot be
/// read or does not show the collector.
pub(super) fn processes() -> Vec<Process> {
    let Some((collector, statuses)) = statuses() else {
        return Vec::new();
    };
    statuses
        .filter_map(|(_, status)| process(&status, &collector))
        .collect()
}

/// The collector's own session in its namespace; 0 when its leader is outside it.
pub(super) fn own_session() -> i32 {
    collector().map_or(0, |collector| collector.sid)
}

/// Where `/proc` keeps the process our PID namespace calls `pid` (as `getpid` or
/// `Child::id` gave it); `None` when it is gone. When `/proc` belongs to an outer namespace,
/// `/proc/<pid>` would be some other process, or none.
pub fn proc_dir(pid: i32) -> Option<PathBuf> {
    let (collector, mut statuses) = statuses()?;
    let ours = |status: &Status| process(status, &collector).is_some_and(|p| p.pid == pid);
    // In one namespace (the common case) the directory is named after `pid`.
    let direct = pid.to_string();
    let name = match Status::read(&direct) {
        Some(status) if ours(&status) => direct,
        _ => statuses.find(|(_, status)| ours(status))?.0,
    };
    Some(Path::new("/proc").join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_depth(proc_pid: i32, depth: usize) -> Collector {
        Collector {
            proc_pid,
            depth,
            sid: 0,
        }
    }

    const NESTED: &str = "Name:\tpython3\nState:\tS (sleeping)\nPPid:\t4107\n\
        NSpid:\t4200\t12\nNSpgid:\t4190\t9\nNSsid:\t4190\t9\n";

    #[test]
    fn ids_are_read_at_the_collectors_depth() {
        let collector = at_depth(4107, 1);
        let process = process(&Status::parse(NESTED), &collector).unwrap();
        assert_eq!((process.pid, process.pgid, process.sid), (12, 9, 9));
        assert!(process.child_of_collector && !process.zombie);
    }

    #[test]
    fn a_process_outside_the_collectors_namespace_is_not_listed() {
        let outside = "State:\tS\nPPid:\t1\nNSpid:\t77\nNSpgid:\t77\nNSsid:\t77\n";
        let collector = at_depth(4107, 1);
        assert_eq!(process(&Status::parse(outside), &collector), None);
    }

    #[test]
    fn a_zombie_is_marked() {
        let zombie = "State:\tZ (zombie)\nPPid:\t5\nNSpid:\t6\nNSpgid:\t6\nNSsid:\t6\n";
        let collector = at_depth(5, 0);
        let process = process(&Status::parse(zombie), &collector).unwrap();
        assert!(process.zombie && process.child_of_collector);
    }

    #[test]
    fn the_collector_finds_itself() {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        assert!(processes().iter().any(|process| process.pid == me));
        let status = std::fs::read_to_string(proc_dir(me).unwrap().join("status")).unwrap();
        assert_eq!(Status::parse(&status).ns_pid.last(), Some(&me));
    }

    #[test]
    fn a_reaped_child_has_no_proc_dir() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        child.wait().unwrap();
        assert_eq!(proc_dir(pid), None);
    }
}
