//! How many plugins run at once, and how long a run waits for its turn.

use super::*;

/// The most lines `s` seen before as many `e` in `log`: plugins that ran at once.
fn most_at_once(log: &str) -> usize {
    let (mut now, mut most) = (0_usize, 0_usize);
    for line in log.lines() {
        match line.trim() {
            "s" => now += 1,
            "e" => now = now.saturating_sub(1),
            _ => {}
        }
        most = most.max(now);
    }
    most
}

#[tokio::test]
async fn at_most_the_cap_of_plugins_run_at_once_across_clones_of_the_policy() {
    let plugins = Plugins::new();
    let body = format!("echo s >> log\nsleep 0.3\necho e >> log\n{PRINTS_T}");
    let plugin = plugins.script("plugin", &body).await;
    let policy = allow(&plugin).with_max_concurrent(2);
    let config = config(&plugin);
    // Clones, as every member's client holds one.
    let runs = (0..6).map(|_| {
        let (config, policy) = (config.clone(), policy.clone());
        async move { run_plugin(&config, &policy).await }
    });
    for result in futures::future::join_all(runs).await {
        assert!(result.is_ok(), "{result:?}");
    }
    let log = plugins.read("log");
    assert_eq!(log.lines().count(), 12, "{log}");
    assert_eq!(most_at_once(&log), 2, "{log}");
}

#[tokio::test]
async fn the_wait_for_a_turn_counts_against_the_deadline() {
    // Each run needs 4 s of its 6 s: the first has 2 s to spare on a loaded machine; the
    // second, after at least 4 s waiting for its turn, has at most 2 s left and times out,
    // where it would have had its 4 s if the wait did not count.
    let plugins = Plugins::new();
    let body = format!("sleep 4\n{PRINTS_T}");
    let plugin = plugins.script("plugin", &body).await;
    let deadline = Duration::from_secs(6);
    let policy = allow(&plugin).with_max_concurrent(1).with_timeout(deadline);
    let config = config(&plugin);
    let started = Instant::now();
    let (first, second) = tokio::join!(run_plugin(&config, &policy), run_plugin(&config, &policy));
    let took = started.elapsed();
    assert!(first.is_ok() != second.is_ok(), "{first:?} {second:?}");
    let late = if first.is_ok() { second } else { first };
    assert_eq!(failure(late), ExecFailure::TimedOut { after: deadline });
    assert!(took < Duration::from_secs(9), "took {took:?}");
}
