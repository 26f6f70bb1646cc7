//! A program a test runs as a child process: its stdout read line by line, each wait bounded
//! by a deadline, its stderr kept whole, and a clean stop that reports how it exited.

use std::{
    ffi::OsString,
    process::{ExitStatus, Stdio},
    time::Duration,
};

use anyhow::{Context as _, bail, ensure};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader, Lines},
    process::{Child, ChildStdout, Command},
    task::JoinHandle,
    time::{Instant, timeout, timeout_at},
};

/// A child process (killed when dropped) whose stdout a test reads line by line.
pub struct ChildProcess {
    child: Child,
    program: OsString,
    lines: Lines<BufReader<ChildStdout>>,
    stderr: JoinHandle<String>,
    deadline: Duration,
    seen: Vec<String>,
}

impl ChildProcess {
    /// Spawns `cmd` with its stdout and stderr piped. `deadline` bounds each wait that
    /// follows: for a line in [`until`](Self::until), and for the exit in
    /// [`stop`](Self::stop).
    ///
    /// # Errors
    /// If it cannot be started.
    pub fn spawn(mut cmd: Command, deadline: Duration) -> anyhow::Result<Self> {
        let program = cmd.as_std().get_program().to_owned();
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut pipe = child.stderr.take().context("no stderr")?;
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            // What was read before a read error is still worth showing.
            let _ = pipe.read_to_string(&mut text).await;
            text
        });
        Ok(Self {
            child,
            program,
            lines: BufReader::new(stdout).lines(),
            stderr,
            deadline,
            seen: Vec::new(),
        })
    }

    /// Every stdout line read so far, in order.
    pub fn seen(&self) -> &[String] {
        &self.seen
    }

    /// Reads lines, each within the deadline, until `accept` takes one (returns `Some`), and
    /// returns what it made of it. `what` names the line awaited in errors.
    ///
    /// # Errors
    /// No such line in time, stdout closed, or an error from `accept`.
    pub async fn until<T>(
        &mut self,
        what: &str,
        mut accept: impl FnMut(&str) -> anyhow::Result<Option<T>>,
    ) -> anyhow::Result<T> {
        let deadline = Instant::now() + self.deadline;
        loop {
            let Ok(line) = timeout_at(deadline, self.lines.next_line()).await else {
                bail!("no {what} within {:?}; saw {:#?}", self.deadline, self.seen);
            };
            let Some(line) = line? else {
                bail!("stdout closed before {what}; saw {:#?}", self.seen);
            };
            let accepted = accept(&line)?;
            self.seen.push(line);
            if let Some(accepted) = accepted {
                return Ok(accepted);
            }
        }
    }

    /// SIGTERM, then its exit status, every stdout line (those read before and the rest) and
    /// its stderr. It is killed if it does not exit within the deadline.
    ///
    /// # Errors
    /// It ignored SIGTERM, or signalling, waiting for it or reading its output failed or
    /// outlived the deadline.
    pub async fn stop(self) -> anyhow::Result<(ExitStatus, Vec<String>, String)> {
        let Self {
            mut child,
            program,
            mut lines,
            stderr,
            deadline: bound,
            mut seen,
        } = self;
        let program = program.display().to_string();
        let pid = child.id().context("already reaped")?;
        let kill = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let sent = timeout(bound, kill)
            .await
            .context("kill -TERM ran too long")??;
        ensure!(sent.success(), "kill -TERM {pid} ({program})");
        let deadline = Instant::now() + bound;
        let Ok(status) = timeout_at(deadline, child.wait()).await else {
            child.start_kill()?;
            bail!("{program} ignored SIGTERM for {bound:?}");
        };
        let status = status?;
        // A process it left behind could hold the pipes open: the deadline bounds them too.
        let rest = async {
            while let Some(line) = lines.next_line().await? {
                seen.push(line);
            }
            anyhow::Ok(stderr.await?)
        };
        let stderr = timeout_at(deadline, rest)
            .await
            .with_context(|| format!("{program}'s output stayed open after it exited"))??;
        Ok((status, seen, stderr))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::process::Command;

    use super::ChildProcess;

    /// `sh -c script` under `deadline`.
    fn shell(script: &str, deadline: Duration) -> anyhow::Result<ChildProcess> {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        ChildProcess::spawn(cmd, deadline)
    }

    /// Prints two lines, then on SIGTERM one more line and one on stderr, and exits 0.
    const POLITE: &str = "trap 'echo bye; echo err >&2; exit 0' TERM; echo one; echo two; \
                          while :; do sleep 0.1; done";

    #[tokio::test]
    async fn until_returns_what_accept_made_and_stop_returns_every_line() -> anyhow::Result<()> {
        let mut child = shell(POLITE, Duration::from_secs(10))?;
        let len = child
            .until("two", |line| Ok((line == "two").then_some(line.len())))
            .await?;
        assert_eq!(len, 3);
        assert_eq!(child.seen(), ["one", "two"]);
        let (status, lines, stderr) = child.stop().await?;
        assert!(status.success(), "{status}");
        assert_eq!(lines, ["one", "two", "bye"]);
        assert_eq!(stderr, "err\n");
        Ok(())
    }

    #[tokio::test]
    async fn until_fails_when_accept_fails_or_stdout_closes() -> anyhow::Result<()> {
        let mut child = shell("echo one", Duration::from_secs(10))?;
        let refused = child
            .until("a number", |line| {
                line.parse::<u8>().map(Some).map_err(Into::into)
            })
            .await;
        assert!(refused.is_err(), "{refused:?}");
        let closed = child
            .until("two", |line| Ok((line == "two").then_some(())))
            .await;
        let error = format!("{:#}", closed.err().unwrap());
        assert!(error.contains("stdout closed before two"), "{error}");
        Ok(())
    }

    #[tokio::test]
    async fn until_and_stop_give_up_at_the_deadline() -> anyhow::Result<()> {
        let deadline = Duration::from_millis(300);
        let mut child = shell("trap '' TERM; while :; do sleep 0.1; done", deadline)?;
        let silent = child.until("a line", |_| Ok(Some(()))).await;
        let error = format!("{:#}", silent.err().unwrap());
        assert!(error.contains("no a line within 300ms"), "{error}");
        let stopped = child.stop().await;
        let error = format!("{:#}", stopped.err().unwrap());
        assert!(error.contains("ignored SIGTERM"), "{error}");
        Ok(())
    }
}
