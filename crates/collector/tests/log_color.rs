//! The text log is coloured only on a terminal: the real `collector` binary, its log piped as
//! `kubectl logs` and a log file get it, carries no ANSI escape unless `--color=always` asks.

use std::{ffi::OsStr, process::Command};

use collector::cli::LogColor;

const ESCAPE: &str = "\u{1b}[";

/// Runs `collector` with `args` and `env`, stdout and stderr piped, and returns them. A
/// members directory that does not exist makes both commands log at once and exit: `check`
/// warns on stderr, the collector fails to read its kubeconfig and logs that on stdout.
fn run(args: &[&str], env: &[(&str, &str)]) -> std::io::Result<(String, String)> {
    let absent =
        std::env::temp_dir().join(format!("tether-log-color-absent-{}", std::process::id()));
    let mut command = Command::new(env!("CARGO_BIN_EXE_collector"));
    command
        .args(args)
        .args(["--members-from", "directory", "--members-dir"])
        .arg(&absent)
        .env_remove("NO_COLOR")
        .env_remove("TETHER_COLOR")
        .env_remove("TETHER_LOG_FORMAT")
        .env_remove("RUST_LOG")
        .envs(env.iter().copied());
    let output = command.output()?;
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    Ok((text(&output.stdout), text(&output.stderr)))
}

#[test]
fn check_logs_plain_text_into_a_pipe() {
    let (_, stderr) = run(&["check"], &[]).unwrap();
    assert!(stderr.contains("WARN"), "check logged nothing: {stderr}");
    assert!(!stderr.contains(ESCAPE), "escapes in a pipe: {stderr:?}");
}

#[test]
fn the_collector_logs_plain_text_into_a_pipe() {
    let (stdout, _) = run(&["--kubeconfig", "/nonexistent/kubeconfig"], &[]).unwrap();
    assert!(stdout.contains("collector stopped"), "{stdout}");
    assert!(!stdout.contains(ESCAPE), "escapes in a pipe: {stdout:?}");
}

#[test]
fn color_always_colours_a_pipe_too_whatever_no_color_says() {
    let (_, stderr) = run(&["check", "--color=always"], &[("NO_COLOR", "1")]).unwrap();
    assert!(stderr.contains(ESCAPE), "no escapes: {stderr:?}");
    let always = [("TETHER_COLOR", "always")];
    let (stdout, _) = run(&["--kubeconfig", "/nonexistent/kubeconfig"], &always).unwrap();
    let coloured = stdout.contains(ESCAPE);
    assert!(coloured, "TETHER_COLOR=always: no escapes: {stdout:?}");
}

#[test]
fn the_json_log_never_carries_escapes() {
    let (_, stderr) = run(&["check", "--color=always", "--log-format=json"], &[]).unwrap();
    assert!(stderr.contains("\"level\":\"WARN\""), "{stderr}");
    assert!(!stderr.contains(ESCAPE), "{stderr:?}");
}

#[test]
fn auto_colours_a_terminal_unless_no_color_is_set_and_not_empty() {
    let unset: Option<&OsStr> = None;
    assert!(LogColor::Auto.enabled(true, unset));
    assert!(LogColor::Auto.enabled(true, Some(OsStr::new(""))));
    assert!(!LogColor::Auto.enabled(true, Some(OsStr::new("1"))));
    assert!(!LogColor::Auto.enabled(false, unset));
    assert!(LogColor::Always.enabled(false, Some(OsStr::new("1"))));
    assert!(!LogColor::Never.enabled(true, unset));
}
