//! Running the Go ClusterProfile consumer (`e2e/interop/clusterprofile-client`, built by
//! `hack/interop.sh`): a real client-go program with its own exec-credential machinery, and
//! the JSON lines it prints.

use std::{
    path::Path,
    process::{ExitStatus, Stdio},
    time::Duration,
};

use anyhow::{Context as _, bail};
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader, Lines},
    process::{Child, ChildStdout, Command},
    task::JoinHandle,
    time::Instant,
};

/// A generous bound on each thing awaited: a process start, a plugin run, a watch event.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Where the consumer finds the profile and how it picks the provider.
pub struct ProfileRef<'a> {
    /// The control plane's kubeconfig file.
    pub kubeconfig: &'a Path,
    /// The profile's namespace.
    pub namespace: &'a str,
    /// The profile's name.
    pub name: &'a str,
    /// The provider file.
    pub provider_file: &'a Path,
}

/// The consumer for `profile`, with `extra` flags and exactly `PATH` in its environment (for
/// plugins that are scripts): no proxy variable reaches it, and every address it dials is the
/// loopback one of a harness apiserver.
///
/// # Errors
/// If `hack/interop.sh` cannot build it.
pub fn command(profile: &ProfileRef<'_>, extra: &[&str]) -> anyhow::Result<Command> {
    let binary = testkit::interop::binary("clusterprofile-client")?;
    let mut cmd = Command::new(binary);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg("--kubeconfig")
        .arg(profile.kubeconfig)
        .args(["--profile-namespace", profile.namespace])
        .args(["--profile-name", profile.name])
        .arg("--provider-file")
        .arg(profile.provider_file)
        .args(extra)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    Ok(cmd)
}

/// Runs `cmd` to completion (within [`DEADLINE`]): exit status, stdout lines as JSON, stderr.
///
/// # Errors
/// Not finishing in time, or output that is not the contract's.
pub async fn run(mut cmd: Command) -> anyhow::Result<(ExitStatus, Vec<Value>, String)> {
    let out = tokio::time::timeout(DEADLINE, cmd.output())
        .await
        .context("the interop client ran too long")??;
    let stderr = String::from_utf8(out.stderr)?;
    let lines = (String::from_utf8(out.stdout)?.lines())
        .map(|l| serde_json::from_str(l).with_context(|| format!("not JSON: {l:?}")))
        .collect::<anyhow::Result<_>>()?;
    Ok((out.status, lines, stderr))
}

/// The consumer running in the background, its stdout read line by line.
pub struct Running {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    stderr: JoinHandle<String>,
    /// Every line read so far, for failure messages.
    pub seen: Vec<String>,
}

impl Running {
    /// Spawns `cmd` with its stdout and stderr piped.
    pub fn spawn(mut cmd: Command) -> anyhow::Result<Self> {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut pipe = child.stderr.take().context("no stderr")?;
        let stderr = tokio::spawn(async move {
            let mut buf = String::new();
            let _ = pipe.read_to_string(&mut buf).await;
            buf
        });
        Ok(Self {
            child,
            lines: BufReader::new(stdout).lines(),
            stderr,
            seen: Vec::new(),
        })
    }

    /// Waits, until [`DEADLINE`], for a line that `want` accepts, and returns it.
    ///
    /// # Errors
    /// No such line in time, stdout closed, or a line that is not JSON.
    pub async fn until(
        &mut self,
        what: &str,
        want: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let Ok(line) = tokio::time::timeout_at(deadline, self.lines.next_line()).await else {
                bail!("no {what} within {DEADLINE:?}; saw {:?}", self.seen);
            };
            let Some(line) = line? else {
                bail!("stdout closed before {what}; saw {:?}", self.seen);
            };
            let value: Value =
                serde_json::from_str(&line).with_context(|| format!("not JSON: {line}"))?;
            self.seen.push(line);
            if want(&value) {
                return Ok(value);
            }
        }
    }

    /// SIGTERM, then the exit status (the contract: 0) and its stderr; the rest of stdout is
    /// in [`seen`](Self::seen). It is killed if it does not stop within [`DEADLINE`].
    ///
    /// # Errors
    /// It ignored SIGTERM, or waiting for it failed.
    pub async fn terminate(mut self) -> anyhow::Result<(ExitStatus, Vec<String>, String)> {
        let pid = self.child.id().context("already reaped")?;
        let sent = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await?;
        anyhow::ensure!(sent.success(), "kill -TERM {pid}");
        let Ok(status) = tokio::time::timeout(DEADLINE, self.child.wait()).await else {
            self.child.kill().await?;
            bail!("the interop client ignored SIGTERM for {DEADLINE:?}");
        };
        while let Some(line) = self.lines.next_line().await? {
            self.seen.push(line);
        }
        Ok((status?, self.seen, self.stderr.await?))
    }
}

/// Whether `line` is a successful list that holds `object` (`namespace/name`).
pub fn is_list_with(line: &Value, object: &str) -> bool {
    let items = line["items"].as_array();
    line["kind"] == "list"
        && line["ok"] == true
        && items.is_some_and(|i| i.iter().any(|item| item == object))
}

/// Whether `line` is the informer's ADDED of `object` (`namespace/name`).
pub fn is_added(line: &Value, object: &str) -> bool {
    line["kind"] == "watch" && line["type"] == "ADDED" && line["object"] == object
}
