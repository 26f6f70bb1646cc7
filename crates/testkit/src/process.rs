//! A child process with its output in a log file, stopped by PID.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rustix::process::{Pid, Signal, kill_process};

/// How often the harness looks at a process or port it waits for.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// A server process started by the harness. Dropping it kills it (SIGKILL) and reaps it.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    /// `None` once reaped.
    child: Option<Child>,
    pid: u32,
    log: PathBuf,
    what: String,
}

impl ServerProcess {
    /// Spawns `cmd` with stdout and stderr appended to `log`.
    pub(crate) fn spawn(cmd: Command, log: PathBuf, what: String) -> Result<Self> {
        Self::spawn_with(cmd, log, what, false)
    }

    /// Spawns `cmd` with stderr appended to `log` and stdout a pipe for
    /// [`take_stdout`](Self::take_stdout).
    pub(crate) fn spawn_piped(cmd: Command, log: PathBuf, what: String) -> Result<Self> {
        Self::spawn_with(cmd, log, what, true)
    }

    fn spawn_with(mut cmd: Command, log: PathBuf, what: String, piped: bool) -> Result<Self> {
        let err = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("opening log file {}", log.display()))?;
        let out = match piped {
            true => Stdio::piped(),
            false => err
                .try_clone()
                .context("duplicating the log file handle")?
                .into(),
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("spawning {what} ({:?})", cmd.get_program()))?;
        let pid = child.id();
        tracing::debug!(%what, pid, log = %log.display(), "spawned");
        Ok(Self {
            child: Some(child),
            pid,
            log,
            what,
        })
    }

    /// The process id (stays the same after the process exits).
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Its stdout, if it is a pipe ([`spawn_piped`](Self::spawn_piped)), the first time.
    pub(crate) fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.as_mut()?.stdout.take()
    }

    /// Whether it has been spawned and has not exited.
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// Where its stdout and stderr go.
    pub(crate) fn log(&self) -> &Path {
        &self.log
    }

    /// `Some(status)` once the process has exited (it is then reaped).
    pub(crate) fn exited(&mut self) -> Result<Option<ExitStatus>> {
        match &mut self.child {
            None => Ok(None),
            Some(child) => child
                .try_wait()
                .with_context(|| format!("waiting for {} (pid {})", self.what, self.pid)),
        }
    }

    /// The last `lines` lines of the log, for error messages.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// Sends SIGTERM, waits up to `grace` for the process to exit, then sends SIGKILL and waits
    /// for it. Returns once the process is reaped, so its PID is gone.
    pub(crate) async fn stop(&mut self, grace: Duration) -> Result<()> {
        let Some(child) = &mut self.child else {
            return Ok(());
        };
        if child.try_wait()?.is_none() {
            // ESRCH is fine: it exited between the check and the signal; the wait reaps it.
            let _ = kill_process(pid_of(child), Signal::TERM);
            let deadline = Instant::now() + grace;
            while child.try_wait()?.is_none() && Instant::now() < deadline {
                tokio::time::sleep(POLL).await;
            }
            if child.try_wait()?.is_none() {
                tracing::debug!(what = %self.what, pid = self.pid, "still running after SIGTERM; SIGKILL");
                child.kill().ok();
            }
            // After SIGKILL the exit is immediate; `wait` only reaps.
            child
                .wait()
                .with_context(|| format!("reaping {} (pid {})", self.what, self.pid))?;
        }
        self.child = None;
        tracing::debug!(what = %self.what, pid = self.pid, "stopped");
        Ok(())
    }

    /// Sends `signal` to the running process.
    pub(crate) fn signal(&self, signal: Signal) -> Result<()> {
        let child = self.child.as_ref().context("the process is not running")?;
        kill_process(pid_of(child), signal)
            .with_context(|| format!("signalling {} (pid {})", self.what, self.pid))
    }

    /// SIGKILL and reap without waiting for a graceful exit (used by `Drop`).
    pub(crate) fn kill_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().ok();
            child.wait().ok();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // A stopped process ignores SIGKILL until it is continued.
        let _ = self.signal(Signal::CONT);
        self.kill_now();
    }
}

fn pid_of(child: &Child) -> Pid {
    Pid::from_child(child)
}

/// The last `lines` lines of the file at `path` (or why it could not be read).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}
