//! Exec credential plugins that cannot give a credential, beside a healthy token member of the
//! same collector: a plugin that hangs is killed at `--exec-timeout` and the member is
//! `ExecFailed`; a command that is not on the `--allow-exec` list is `ExecNotAllowed` and
//! never runs; the token member stays Ready throughout.

use std::{
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use e2e::{
    collector_run::temp_dir,
    kubeconfig_plane::{
        CapiPlane, Kubeconfig,
        read_api::{condition, sample_ready, unix_now, wait_condition, wait_healthy},
    },
    limits::{HOUR, PROBE, START},
};
use testkit::Environment;

const EXEC_TIMEOUT: Duration = Duration::from_secs(2);
const CONVERGE: Duration = Duration::from_secs(10);
/// Scheduling slack on a loaded machine, on top of the exec timeout and a probe period.
const SLACK: Duration = Duration::from_secs(3);

/// Writes an executable `/bin/sh` script `name` into `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::canonicalize(path).unwrap()
}

/// Checks every run in `runs` (`<pid> <start, Unix seconds>` lines) that started more than
/// the exec timeout plus slack ago: its process must be gone (killed with its group). Returns
/// how many were checked.
fn killed_in_time(runs: &str) -> usize {
    let now = unix_now();
    let old_enough = (EXEC_TIMEOUT + SLACK).as_secs_f64();
    let mut checked = 0;
    for line in runs.lines() {
        let (pid, started) = line.split_once(' ').unwrap();
        if now - started.parse::<f64>().unwrap() < old_enough {
            continue;
        }
        let cmdline = testkit::proc_file(pid.parse().unwrap(), "cmdline");
        assert!(
            cmdline.is_empty(),
            "run {pid} outlived --exec-timeout: {cmdline:?}"
        );
        checked += 1;
    }
    checked
}

#[tokio::test]
async fn a_hanging_plugin_fails_in_time_an_unlisted_one_never_runs_and_others_stay_ready()
-> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let (control_plane, member) = (env.control_plane(), env.cluster(1));
    let (_, token) = member.create_agent("agents", "agent", HOUR).await?;

    let dir = temp_dir("exec-failures")?;
    let hang_runs = dir.join("hang-runs");
    let record = format!("echo \"$$ $(date +%s)\" >> '{}'", hang_runs.display());
    let hang = script(&dir, "hang.sh", &format!("{record}\nexec sleep 60"));
    let marker = dir.join("unlisted-ran");
    let touch = format!("touch '{}'\nexit 1", marker.display());
    let unlisted = script(&dir, "unlisted.sh", &touch);

    // Three members, all on member1's apiserver: a token, and the two plugins.
    let plane = CapiPlane::create(control_plane).await?;
    let healthy = Kubeconfig::token(member, &token);
    plane.write("healthy", &healthy).await?;
    let hang_flag = hang.display().to_string();
    let timeout = EXEC_TIMEOUT.as_secs().to_string();
    let flags = ["--allow-exec", &hang_flag, "--exec-timeout", &timeout];
    let collector = plane.source.start_collector(PROBE, &flags).await?;
    wait_healthy(&collector, "healthy", START).await?;

    // Writes member `name` running `plugin`, polls until its `Ready` is `want`, and then its
    // `CredentialsValid` must be too: how long that took after the write, and `Ready`.
    let failing = async |name: &str, plugin: &Path, want: &str| {
        let kubeconfig = Kubeconfig::exec(member, plugin, &[]);
        plane.write(name, &kubeconfig).await.unwrap();
        let ready = wait_condition(&collector, name, "Ready", want, CONVERGE);
        let ready = ready.await.unwrap();
        let credentials = condition(&collector, name, "CredentialsValid").await;
        assert_eq!(credentials.unwrap().short(), want, "{name}");
        ready
    };
    let done = AtomicBool::new(false);
    let steps = async {
        // The hanging plugin is killed at the timeout, and the member says why.
        let (took, ready) = failing("hanging", &hang, "False/ExecFailed").await;
        println!(
            "hanging plugin (--exec-timeout 2, probe period 1 s) → Ready=False/ExecFailed \
             {took:?} after its Secret was written: {}",
            ready.message
        );
        assert!(
            took <= EXEC_TIMEOUT + PROBE + SLACK,
            "ExecFailed only after {took:?}"
        );
        let message = &ready.message;
        assert!(message.contains("did not finish within"), "{message}");
        let runs = std::fs::read_to_string(&hang_runs).unwrap_or_default();
        assert!(runs.lines().count() >= 1, "the allowed plugin did run");

        // A command off the allow-list is refused before anything runs.
        let (took, ready) = failing("unlisted", &unlisted, "False/ExecNotAllowed").await;
        println!(
            "plugin off the allow-list → Ready=False/ExecNotAllowed in {took:?}: {}",
            ready.message
        );
        // Three more probe periods in which it still must not run.
        tokio::time::sleep(3 * PROBE).await;
        assert!(
            !marker.exists(),
            "{} ran although it is not allowed",
            unlisted.display()
        );
        let still = condition(&collector, "hanging", "Ready").await.unwrap();
        assert_eq!(
            still.short(),
            "False/ExecFailed",
            "the hang is still reported"
        );
        done.store(true, Ordering::Relaxed);
    };
    let (healthy, ()) = tokio::join!(sample_ready(&collector, "healthy", &done), steps);
    println!("healthy's Ready throughout: {healthy:?}");
    assert_eq!(
        healthy,
        ["True/MemberReady"],
        "the token member was never affected"
    );
    let hang_runs = std::fs::read_to_string(&hang_runs).unwrap_or_default();
    println!(
        "the hanging plugin ran {} times; the unlisted one never",
        hang_runs.lines().count()
    );
    let failures = collector
        .metric("tether_token_fetch_failures_total", "cache=\"members\"")
        .await?;
    assert!(failures >= 2.0, "{failures} failed fetches");
    let killed = killed_in_time(&hang_runs);
    println!("runs of the hanging plugin older than the timeout, all killed: {killed}");
    assert!(killed >= 1, "no run old enough to check");
    Ok(())
}
