//! Running an allowed plugin under a deadline, as client-go's exec authenticator does.

use std::{process::Stdio, time::Duration};

use tokio::{
    io::{AsyncRead, AsyncReadExt as _},
    process::{Child, Command},
    time::Instant,
};

use crate::Text;

use super::{
    ExecConfig, ExecError, ExecFailure, ExecOutput, ExecPolicy, descendants,
    plugin_declaration::Invocation,
    private_home::PrivateHome,
    wire::{EXEC_INFO_ENV, ExecInfo},
};

/// The plugin's `PATH`, whatever the collector's is: system directories only.
pub const PLUGIN_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How long to wait for a killed plugin to be reaped. SIGKILL cannot be caught, so this only
/// covers a process stuck in the kernel (on a dead NFS mount, say); tokio reaps it later.
const REAP_WAIT: Duration = Duration::from_secs(1);

/// Runs `config`'s plugin if `policy` allows it and reads the credential it prints.
///
/// The command is resolved and checked first ([`ExecPolicy::check`]: the command is declared,
/// and its declaration accepts every argument and variable the definition passes); then the
/// resolved path, not the name, is started with the declaration's fixed arguments followed by
/// the definition's, a null stdin, and an environment built from nothing:
///
/// - `PATH` = [`PLUGIN_PATH`], and `HOME` = a fresh `0700` directory of this run's own, which
///   is also the working directory and is removed after the run;
/// - the declaration's fixed variables (which may replace `PATH` or `HOME`);
/// - the definition's accepted variables;
/// - `KUBERNETES_EXEC_INFO`, last, so nothing replaces it.
///
/// Nothing of the collector's own environment is passed on. With
/// [`ExecPolicy::with_run_as`], the plugin runs as that user and group, with no
/// supplementary group, and its `HOME` is theirs.
///
/// At most [`ExecPolicy::with_max_concurrent`] plugins run at once; the wait for a turn, the
/// check and the run are all bounded by [`ExecPolicy::timeout`]: at the deadline,
/// the plugin's process group is killed, so a grandchild that holds stdout open ends too. The
/// [module](super)'s example runs one.
///
/// # Errors
/// [`ExecError::NotAllowed`], [`ExecError::ArgNotAllowed`] or [`ExecError::EnvNotAllowed`]
/// when nothing was run, otherwise [`ExecError::Failed`].
pub async fn run(config: &ExecConfig, policy: &ExecPolicy) -> Result<ExecOutput, ExecError> {
    let timeout = policy.timeout();
    let deadline = Instant::now() + timeout;
    let timed_out = ExecFailure::TimedOut { after: timeout };
    // The wait for a turn counts against the run's deadline; the turn is held until the
    // plugin is reaped and its HOME removed.
    let Ok(Some(_turn)) = tokio::time::timeout_at(deadline, policy.turn()).await else {
        return Err(timed_out.into());
    };

    let check = {
        let (policy, config) = (policy.clone(), config.clone());
        tokio::task::spawn_blocking(move || {
            let invocation = policy.invocation(&config)?;
            let home = PrivateHome::create(policy.run_as()).map_err(|err| {
                ExecFailure::Spawn(Text::new(&format!(
                    "could not make the plugin's private HOME: {err}"
                )))
            })?;
            Ok::<_, ExecError>((invocation, home))
        })
    };
    descendants::adopt_orphans();
    let (invocation, home) = match tokio::time::timeout_at(deadline, check).await {
        Ok(Ok(checked)) => checked?,
        // NB: the check only reads metadata; it cannot panic short of a bug, so refuse.
        Ok(Err(_panicked)) => {
            return Err(ExecError::NotAllowed {
                command: Text::new(&config.command),
            });
        }
        Err(_elapsed) => return Err(timed_out.into()),
    };

    let stdout = execute(&invocation, &home, policy, config, deadline).await;
    // Removal reads the file system; a plugin may have left a tree behind. The sweep reads
    // /proc and reaps what it kills.
    let _ = tokio::task::spawn_blocking(move || {
        descendants::sweep();
        home.remove()
    })
    .await;
    ExecOutput::from_json(&stdout?, config.api_version)
        .map_err(|bad| ExecFailure::BadOutput(bad).into())
}

async fn execute(
    invocation: &Invocation,
    home: &PrivateHome,
    policy: &ExecPolicy,
    config: &ExecConfig,
    deadline: Instant,
) -> Result<Vec<u8>, ExecFailure> {
    let mut command = Command::new(&invocation.path);
    command
        .args(&invocation.args)
        .env_clear()
        .env("PATH", PLUGIN_PATH)
        .env("HOME", home.path())
        .envs(invocation.env.iter().map(|var| (&var.name, &var.value)))
        // Set last so that nothing replaces it, as in client-go.
        .env(EXEC_INFO_ENV, ExecInfo::for_plugin(config).to_json())
        .current_dir(home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a timeout kills whatever it started as well.
        .process_group(0)
        .kill_on_drop(true);
    if let Some(run_as) = policy.run_as() {
        // std sets the group first and, when the collector is root, drops supplementary
        // groups.
        command.uid(run_as.uid).gid(run_as.gid);
    }
    let child = command
        .spawn()
        .map_err(|err| ExecFailure::Spawn(Text::new(&err.to_string())))?;
    let mut plugin = Plugin::started(child);

    match tokio::time::timeout_at(deadline, collect(&mut plugin.0)).await {
        Ok(Ok(done)) => done,
        Ok(Err(failure)) => {
            plugin.kill().await;
            Err(failure)
        }
        Err(_elapsed) => {
            plugin.kill().await;
            Err(ExecFailure::TimedOut {
                after: policy.timeout(),
            })
        }
    }
}

/// A started plugin. Dropped before it is reaped (on a failure, or when the caller drops the
/// run), it kills its whole process group. Its descendants that left the group are swept
/// after the run ([`descendants`]).
struct Plugin(Child, Option<i32>);

impl Plugin {
    fn started(child: Child) -> Self {
        let pid = child.id().and_then(|id| i32::try_from(id).ok());
        if let Some(pid) = pid {
            descendants::started(pid);
        }
        Self(child, pid)
    }

    /// Kills the group and reaps the plugin, within [`REAP_WAIT`].
    async fn kill(&mut self) {
        self.kill_group();
        // An error means it has already exited; either way, reap it.
        let _ = self.0.start_kill();
        let _ = tokio::time::timeout(REAP_WAIT, self.0.wait()).await;
    }

    fn kill_group(&self) {
        // `id` is `None` once the plugin is reaped, and from then on its group ID may be
        // reused by someone else's group.
        let group = self
            .0
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(group) = group {
            // ESRCH only means the group is already gone.
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        self.kill_group();
        if let Some(pid) = self.1 {
            // `id` is `None` once tokio has reaped it.
            descendants::ended(pid, self.0.id().is_none());
        }
    }
}

/// Reads stdout and stderr to their ends, then the exit status. The outer `Result` fails when
/// the plugin must be killed; the inner one is the run's result.
async fn collect(child: &mut Child) -> Result<Result<Vec<u8>, ExecFailure>, ExecFailure> {
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ExecFailure::Read(Text::new(
            "the plugin's pipes were not set up",
        )));
    };
    // The exit status is read only after both pipes end: until the child is reaped, its
    // process group ID cannot be reused, so `kill` cannot hit an unrelated group.
    let (stdout, stderr) =
        tokio::try_join!(read_capped(stdout), async { Ok(read_tail(stderr).await) })?;
    let status = child
        .wait()
        .await
        .map_err(|err| ExecFailure::Read(Text::new(&err.to_string())))?;
    if status.success() {
        Ok(Ok(stdout))
    } else {
        Ok(Err(ExecFailure::Exited {
            code: status.code(),
            stderr: stderr_text(&stderr),
        }))
    }
}

async fn read_capped(stdout: impl AsyncRead + Unpin) -> Result<Vec<u8>, ExecFailure> {
    let max = ExecPolicy::MAX_STDOUT;
    let mut out = Vec::new();
    stdout
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .await
        .map_err(|err| ExecFailure::Read(Text::new(&err.to_string())))?;
    if out.len() > max {
        return Err(ExecFailure::OutputTooLarge { max });
    }
    Ok(out)
}

/// The last [`ExecPolicy::MAX_STDERR`] bytes of stderr. Reads to the end, so that a chatty
/// plugin never blocks on a full pipe, but keeps only the end, which says why it failed.
async fn read_tail(mut stderr: impl AsyncRead + Unpin) -> Vec<u8> {
    let keep = ExecPolicy::MAX_STDERR;
    let mut tail = Vec::new();
    let mut chunk = vec![0; 16 * 1024];
    // A read error ends stderr like EOF does: stderr only explains a failure.
    while let Ok(n @ 1..) = stderr.read(&mut chunk).await {
        tail.extend_from_slice(chunk.get(..n).unwrap_or_default());
        if tail.len() > 2 * keep {
            tail.drain(..tail.len() - keep);
        }
    }
    tail.drain(..tail.len().saturating_sub(keep));
    tail
}

/// The end of stderr as one [`Text`] line, `…` in front when cut.
fn stderr_text(stderr: &[u8]) -> Text {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    // Room for the leading `…` and for the one `Text` appends when it cuts.
    let budget = Text::MAX_BYTES - 2 * '…'.len_utf8();
    if text.len() <= budget {
        return Text::new(text);
    }
    let mut start = text.len() - budget;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    Text::new(&format!("…{}", text.get(start..).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_stderr_is_kept_whole_and_on_one_line() {
        let text = stderr_text(b"  error: denied\n\x1b[31mretry\n");
        assert_eq!(text.as_str(), "error: denied  [31mretry");
    }

    #[test]
    fn long_stderr_keeps_its_end() {
        let mut stderr = "é".repeat(5000).into_bytes();
        stderr.extend_from_slice(b"\nthe real error\n");
        let text = stderr_text(&stderr);
        assert!(text.as_str().len() <= Text::MAX_BYTES, "{text}");
        assert!(text.as_str().starts_with('…'), "{text}");
        assert!(text.as_str().ends_with("é the real error"), "{text}");
    }

    #[tokio::test]
    async fn stderr_is_read_to_its_end_but_only_its_tail_kept() {
        let mut stderr = vec![b'x'; 10 * ExecPolicy::MAX_STDERR];
        stderr.extend_from_slice(b"end");
        let tail = read_tail(&stderr[..]).await;
        assert_eq!(tail.len(), ExecPolicy::MAX_STDERR);
        assert!(tail.ends_with(b"xend"));
    }
}
