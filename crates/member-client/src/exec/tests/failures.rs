//! Plugins that hang, fail, or print what is not a credential.

use super::*;

/// Waits (at most 2 s) for `pid` to end: an orphan is reaped by init, not by us. A zombie only
/// waits to be reaped, so it counts as ended. Read through the process table, so that a
/// `/proc` of another PID namespace is not misread.
pub(super) async fn ended(pid: &str) -> bool {
    let pid: i32 = pid.trim().parse().expect("a pid");
    let processes = crate::exec::process_table::processes;
    let running = || processes().iter().any(|p| p.pid == pid && !p.zombie);
    let give_up = Instant::now() + Duration::from_secs(2);
    while running() && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    !running()
}

/// Runs a plugin of `body` under its allowing policy as `adjust` changes it: the plugins'
/// directory, how the run failed, and how long it took.
async fn timed_failure(
    body: &str,
    adjust: impl FnOnce(ExecPolicy) -> ExecPolicy,
) -> (Plugins, ExecFailure, Duration) {
    let plugins = Plugins::new();
    let plugin = plugins.script("plugin", body).await;
    let started = Instant::now();
    let result = run_plugin(&config(&plugin), &adjust(allow(&plugin))).await;
    (plugins, failure(result), started.elapsed())
}

#[rstest]
// The plugin itself hangs.
#[case::hanging("echo $$ > pid\nsleep 60")]
// The plugin exits at once, but leaves a grandchild holding stdout open.
#[case::grandchild_holds_stdout("sleep 60 &\necho $! > pid\nexit 0")]
#[tokio::test]
async fn a_plugin_still_running_at_the_timeout_is_killed(#[case] body: &str) {
    // Long enough for a loaded machine to start the script and write its pid file.
    let timeout = Duration::from_secs(2);
    let (plugins, failed, took) = timed_failure(body, |policy| policy.with_timeout(timeout)).await;
    assert_eq!(failed, ExecFailure::TimedOut { after: timeout });
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let pid = plugins.read("pid");
    assert!(ended(pid.trim()).await, "{pid} still runs");
}

#[tokio::test]
async fn a_dropped_run_kills_what_the_plugin_started() {
    let plugins = Plugins::new();
    let body = "sleep 60 &\necho $! > pid.tmp && mv pid.tmp pid\nwait";
    let plugin = plugins.script("plugin", body).await;
    let (config, policy) = (config(&plugin), allow(&plugin));
    let mut run = Box::pin(run_plugin(&config, &policy));
    let give_up = Instant::now() + Duration::from_secs(5);
    while !plugins.path("pid").exists() {
        assert!(Instant::now() < give_up, "the plugin never started");
        tokio::select! {
            result = &mut run => panic!("the run ended by itself: {result:?}"),
            () = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
    }
    // The caller gives up (a shutdown, say) long before the policy's timeout.
    drop(run);
    let pid = plugins.read("pid");
    assert!(ended(pid.trim()).await, "{pid} still runs");
}

#[rstest]
#[case::code_and_control_characters(
    "printf 'first line\\n\\033[31mdenied\\n' >&2\nexit 3",
    Some(3),
    "first line  [31mdenied"
)]
#[case::no_stderr("exit 1", Some(1), "")]
#[case::killed_by_a_signal("kill -9 $$", None, "")]
#[tokio::test]
async fn a_failing_plugin_reports_its_exit_and_stderr(
    #[case] body: &str,
    #[case] code: Option<i32>,
    #[case] stderr: &str,
) {
    let want = ExecFailure::Exited {
        code,
        stderr: Text::new(stderr),
    };
    assert_eq!(failure(Plugins::new().run(body).await), want);
}

#[tokio::test]
async fn long_stderr_is_cut_to_its_end() {
    let body = "head -c 300000 /dev/zero | tr '\\0' x >&2\necho ' the end' >&2\nexit 1";
    let ExecFailure::Exited { stderr, .. } = failure(Plugins::new().run(body).await) else {
        panic!("not an exit failure");
    };
    assert!(stderr.as_str().len() <= Text::MAX_BYTES);
    assert!(stderr.as_str().starts_with("…x"), "{stderr}");
    assert!(stderr.as_str().ends_with("x the end"), "{stderr}");
}

#[rstest]
#[case::garbage("echo 'this is not json'", BadExecOutput::NotJson { line: 1, column: 2 })]
#[case::wrong_api_version(&prints(V1BETA1, r#"{"token":"t"}"#),
    BadExecOutput::WrongApiVersion { want: ExecApiVersion::V1, got: Some(V1BETA1) })]
#[case::missing_status(&format!(r#"echo '{{"apiVersion":"{V1}","kind":"ExecCredential"}}'"#),
    BadExecOutput::NoStatus)]
#[case::empty_status(&prints(V1, "{}"), BadExecOutput::NoCredential)]
#[case::nothing("true", BadExecOutput::Empty)]
#[tokio::test]
async fn unusable_stdout_is_bad_output(#[case] body: &str, #[case] want: BadExecOutput) {
    let result = Plugins::new().run(body).await;
    assert_eq!(failure(result), ExecFailure::BadOutput(want));
}

#[tokio::test]
async fn a_token_in_broken_json_never_reaches_the_error() {
    let body = format!(
        r#"printf '%s' '{{"apiVersion":"{V1}","kind":"ExecCredential","status":{{"token":"leaked-token-42'"#
    );
    let err = Plugins::new().run(&body).await.unwrap_err();
    assert!(matches!(
        err,
        ExecError::Failed(ExecFailure::BadOutput(BadExecOutput::NotJson { .. }))
    ));
    let printed = format!("{err} {err:?}");
    assert!(!printed.contains("leaked-token"), "{printed}");
}

#[rstest]
// Ends by itself after 2 MB.
#[case::large("head -c 2000000 /dev/zero")]
// Never ends: the cap, not EOF or the timeout, must stop it.
#[case::endless("exec yes")]
#[tokio::test]
async fn stdout_over_the_cap_is_refused_at_the_cap(#[case] body: &str) {
    let (_plugins, failed, took) = timed_failure(body, |policy| policy).await;
    let max = ExecPolicy::MAX_STDOUT;
    assert_eq!(failed, ExecFailure::OutputTooLarge { max });
    // The policy allows 20 s; the cap must not wait for it.
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[tokio::test]
async fn stdout_exactly_at_the_cap_is_read() {
    let plugins = Plugins::new();
    let json =
        format!(r#"{{"apiVersion":"{V1}","kind":"ExecCredential","status":{{"token":"t"}}}}"#);
    let padded = json.clone() + &" ".repeat(ExecPolicy::MAX_STDOUT - json.len());
    fs::write(plugins.path("stdout"), padded).unwrap();
    let out = plugins.run("cat stdout").await.unwrap();
    assert_eq!(out.token.unwrap().expose_secret(), "t");
}

#[tokio::test]
async fn a_plugin_that_cannot_start_is_a_spawn_failure() {
    let plugins = Plugins::new();
    let plugin = plugins
        .executable("plugin", "#!/nonexistent/interpreter\n")
        .await;
    let result = run_plugin(&config(&plugin), &allow(&plugin)).await;
    assert!(matches!(failure(result), ExecFailure::Spawn(_)));
}
