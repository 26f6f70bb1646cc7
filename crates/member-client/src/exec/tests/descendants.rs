//! Plugin descendants that left the plugin's process group end with the run.

use super::*;

/// A Python plugin that prints its credential and exits at once, leaving a grandchild in a
/// session of its own (`setsid`) that writes `pid`, then `marker` a second later.
fn detaching(dir: &Path) -> String {
    format!(
        r#"#!/usr/bin/python3
import os, sys, time
os.chdir({dir:?})
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (0, 1, 2):
            os.close(fd)
        with open("pid.tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename("pid.tmp", "pid")
        time.sleep(1)
        open("marker", "w").close()
        time.sleep(60)
    os._exit(0)
while not os.path.exists("pid"):
    time.sleep(0.01)
sys.stdout.write('{{"apiVersion":"{V1}","kind":"ExecCredential","status":{{"token":"t"}}}}')
"#,
        dir = dir.display().to_string()
    )
}

#[tokio::test]
async fn a_setsid_grandchild_is_killed_when_the_run_ends() {
    let plugins = Plugins::new();
    let plugin = plugins
        .executable("plugin", &detaching(&plugins.path("")))
        .await;
    let output = run_plugin(&config(&plugin), &allow(&plugin)).await;
    assert!(output.is_ok(), "{output:?}");
    let pid = plugins.read("pid");
    let ended = super::failures::ended(pid.trim()).await;
    assert!(ended, "the setsid grandchild {pid} still runs");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let why = "the grandchild wrote its marker";
    assert!(!plugins.path("marker").exists(), "{why}");
}
