//! RSS and CPU time of a child process, from `/proc/<pid>`.

use std::time::{Duration, Instant};

use anyhow::Context as _;

/// One reading of a process.
#[derive(Clone, Copy, Debug)]
pub struct ProcSample {
    /// When it was read.
    pub at: Instant,
    /// Resident set size (`VmRSS`).
    pub rss_bytes: u64,
    /// Peak resident set size (`VmHWM`).
    pub peak_rss_bytes: u64,
    /// User + system CPU time so far.
    pub cpu: Duration,
}

impl ProcSample {
    /// Reads `/proc/<pid>/status` and `/proc/<pid>/stat`.
    ///
    /// # Errors
    /// The process is gone or `/proc` is unreadable.
    pub fn read(pid: u32) -> anyhow::Result<Self> {
        // Through testkit, which finds the process when `/proc` is an outer namespace's.
        let dir = testkit::proc_dir(pid).with_context(|| format!("no /proc entry for {pid}"))?;
        let stat = std::fs::read_to_string(dir.join("stat"))
            .with_context(|| format!("reading /proc/{pid}/stat"))?;
        // Fields after the command name (which is in parentheses and may hold spaces):
        // state is field 3, utime 14 and stime 15.
        let after_comm = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .context("malformed /proc/<pid>/stat")?;
        let fields: Vec<&str> = after_comm.split_whitespace().collect();
        let ticks = |i: usize| -> anyhow::Result<u64> {
            fields
                .get(i)
                .and_then(|v| v.parse().ok())
                .context("malformed /proc/<pid>/stat")
        };
        let total_ticks = ticks(11)? + ticks(12)?;
        Ok(Self {
            at: Instant::now(),
            rss_bytes: testkit::proc_status_bytes(pid, "VmRSS")?,
            peak_rss_bytes: testkit::proc_status_bytes(pid, "VmHWM")?,
            cpu: Duration::from_secs_f64(
                total_ticks as f64 / rustix::param::clock_ticks_per_second() as f64,
            ),
        })
    }

    /// CPU cores used on average between `earlier` and `self` (1.0 = one core busy).
    pub fn cores_since(&self, earlier: &Self) -> f64 {
        let wall = self.at.saturating_duration_since(earlier.at).as_secs_f64();
        if wall == 0.0 {
            return 0.0;
        }
        self.cpu.saturating_sub(earlier.cpu).as_secs_f64() / wall
    }
}
