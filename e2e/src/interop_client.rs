//! Running the Go ClusterProfile consumer (`e2e/interop/clusterprofile-client`, built by
//! `hack/interop.sh`): a real client-go program with its own exec-credential machinery, and
//! the JSON lines it prints.

use std::{
    path::Path,
    process::{ExitStatus, Stdio},
    time::Duration,
};

use anyhow::Context as _;
use serde_json::Value;
use tokio::process::Command;

use crate::child_process::ChildProcess;

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

/// Starts `cmd` in the background, its JSON lines read one by one with [`until`], each wait
/// bounded by [`DEADLINE`]; [`ChildProcess::stop`] ends it with SIGTERM (the contract: exit 0).
///
/// # Errors
/// If it cannot be started.
pub fn spawn(cmd: Command) -> anyhow::Result<ChildProcess> {
    ChildProcess::spawn(cmd, DEADLINE)
}

/// Waits, until [`DEADLINE`], for a line of `client` that `want` accepts, and returns it.
///
/// # Errors
/// No such line in time, stdout closed, or a line that is not JSON.
pub async fn until(
    client: &mut ChildProcess,
    what: &str,
    want: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    client
        .until(what, |line| {
            let value: Value =
                serde_json::from_str(line).with_context(|| format!("not JSON: {line}"))?;
            Ok(want(&value).then_some(value))
        })
        .await
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
