//! Plugin descendants that outlive their plugin: a grandchild that called `setsid` leaves the
//! plugin's process group, so killing the group misses it, and an orphan would otherwise be
//! adopted by init and live on.
//!
//! The collector makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`) before its first
//! plugin runs: every orphaned descendant of a plugin is then re-parented to the collector,
//! where it can be found (its parent is the collector) and reaped. After each run, once the
//! plugin itself is reaped, [`sweep`] kills and reaps every child of the collector that
//!
//! - is not a plugin tokio still owns (those are reaped by tokio, never here), and
//! - is in the process group of a plugin that has ended, or in a session of its own (it
//!   called `setsid`: nothing the collector starts does).
//!
//! It repeats (a killed orphan's own children are re-parented in turn) for a few rounds.
//!
//! Races, and why they are safe: a plugin's pid is registered before it can have children
//! (it is a child of the collector from the moment `spawn` returns, and while registered its
//! group is never swept); a pid is only ever signalled while it is our unreaped child, so it
//! cannot have been reused; a group is forgotten once no process has it. A run dropped before
//! its plugin is reaped leaves its group to be swept after the next run. A descendant that
//! both left the group (`setpgid`) and stayed in the collector's session is not recognized.

use std::{
    collections::BTreeSet,
    sync::{Mutex, MutexGuard, Once, PoisonError},
    time::{Duration, Instant},
};

use rustix::process::{Pid, Signal, WaitOptions, waitpid};

use super::process_table;

/// Rounds of a sweep: each catches the children of what the last one killed.
const ROUNDS: usize = 8;

/// How long a sweep waits for what it killed to be reapable.
const REAP_WAIT: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Plugins {
    /// Plugins tokio owns, by pid (also their group): never signalled or reaped here.
    live: BTreeSet<i32>,
    /// Groups of plugins that ended, whose members are swept.
    ended: BTreeSet<i32>,
}

static PLUGINS: Mutex<Plugins> = Mutex::new(Plugins {
    live: BTreeSet::new(),
    ended: BTreeSet::new(),
});

fn plugins() -> MutexGuard<'static, Plugins> {
    PLUGINS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes the collector adopt its plugins' orphans, once. Where that fails (not Linux), they
/// go to init as before.
pub(super) fn adopt_orphans() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    });
}

/// `pid` was just spawned as a plugin.
pub(super) fn started(pid: i32) {
    let mut plugins = plugins();
    plugins.ended.remove(&pid);
    plugins.live.insert(pid);
}

/// The plugin `pid` ended; `reaped` when tokio has reaped it (else tokio still will).
pub(super) fn ended(pid: i32, reaped: bool) {
    let mut plugins = plugins();
    if reaped {
        plugins.live.remove(&pid);
    }
    plugins.ended.insert(pid);
}

/// Kills and reaps the collector's children that descend from ended plugins; see the module
/// documentation. Blocking: it reads `/proc` and waits up to [`REAP_WAIT`] per round.
pub(super) fn sweep() {
    let session = process_table::own_session();
    for _ in 0..ROUNDS {
        let (live, ended) = {
            let plugins = plugins();
            (plugins.live.clone(), plugins.ended.clone())
        };
        let all = process_table::processes();
        let strays: Vec<Pid> = (all.iter())
            .filter(|p| p.child_of_collector && !live.contains(&p.pid))
            .filter(|p| ended.contains(&p.pgid) || p.sid != session)
            .filter_map(|p| Pid::from_raw(p.pid))
            .collect();
        // Forget groups no process is in any more.
        let in_use: BTreeSet<i32> = all.iter().map(|p| p.pgid).collect();
        plugins().ended.retain(|group| in_use.contains(group));
        if strays.is_empty() {
            return;
        }
        for &stray in &strays {
            // Our unreaped child: the pid cannot have been reused.
            let _ = rustix::process::kill_process(stray, Signal::KILL);
        }
        reap(&strays);
    }
}

fn reap(strays: &[Pid]) {
    let give_up = Instant::now() + REAP_WAIT;
    let mut left: Vec<Pid> = strays.to_vec();
    while !left.is_empty() && Instant::now() < give_up {
        left.retain(|&pid| matches!(waitpid(Some(pid), WaitOptions::NOHANG), Ok(None)));
        if !left.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
