//! One baseline process: its output read into a [`Ledger`], its stderr kept in a log file.

use std::{path::Path, process::Stdio, sync::Arc};

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};

use super::{
    observation::Ledger,
    system::{Programs, System},
};
use crate::scale::proc_stats::ProcSample;

/// The longest output line read; a longer one is a malformed observation, not a reason to grow.
const MAX_LINE: u64 = 64 * 1024;

/// A running baseline process.
pub struct BaselineProcess {
    /// Which system it runs.
    pub system: System,
    /// What it reported.
    pub ledger: Arc<Ledger>,
    child: tokio::process::Child,
    /// Reads its stdout; a `JoinSet` aborts it when dropped.
    _reader: tokio::task::JoinSet<()>,
}

impl BaselineProcess {
    /// Starts `system` on the members of `fleet` (named `members`), its stderr into
    /// `<log_dir>/<system>.log`.
    ///
    /// # Errors
    /// The program not starting.
    pub fn spawn<'a>(
        system: System,
        programs: &Programs,
        fleet: &Path,
        members: impl IntoIterator<Item = &'a str>,
        log_dir: &Path,
    ) -> anyhow::Result<Self> {
        let log = log_dir.join(format!("{system:?}.log"));
        let stderr =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = system
            .command(programs, fleet)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", system.label()))?;
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let ledger = Arc::new(Ledger::new(members));
        let feed = Arc::clone(&ledger);
        let mut reader = tokio::task::JoinSet::new();
        reader.spawn(async move {
            let (mut lines, mut line) = (BufReader::new(stdout), Vec::new());
            while let Ok(1..) = (&mut lines)
                .take(MAX_LINE)
                .read_until(b'\n', &mut line)
                .await
            {
                feed.apply_line(String::from_utf8_lossy(&line).trim_end());
                line.clear();
            }
        });
        Ok(Self {
            system,
            ledger,
            child,
            _reader: reader,
        })
    }

    /// Its resident set size, or an error if it exited.
    ///
    /// # Errors
    /// The process is gone.
    pub fn sample(&mut self) -> anyhow::Result<ProcSample> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!("{} exited: {status}", self.system.label());
        }
        let pid = self.child.id().context("no pid")?;
        ProcSample::read(pid)
    }
}
