//! Definitions that name a plugin the operator did not allow.

use super::*;

/// How a definition may try to run a plugin the operator did not allow.
#[derive(Debug)]
enum Trick {
    /// Its own script.
    OtherScript,
    /// The allowed script, by a path relative to wherever the collector runs.
    RelativePath,
    /// A symlink to its script, named like the allowed plugin.
    Symlink,
    /// A name that is on no `PATH` entry.
    BareName,
    /// A policy that allows nothing.
    NoPolicy,
    /// The allowed script, with `LD_PRELOAD` set.
    Preload,
}

#[rstest]
#[case::other_script(Trick::OtherScript)]
#[case::relative_path(Trick::RelativePath)]
#[case::symlink(Trick::Symlink)]
#[case::bare_name(Trick::BareName)]
#[case::no_policy(Trick::NoPolicy)]
#[case::preload(Trick::Preload)]
#[tokio::test]
async fn a_refused_command_never_runs(#[case] trick: Trick) {
    let plugins = Plugins::new();
    let allowed = plugins.script("allowed", PRINTS_T).await;
    // Leaves a marker, so that a run shows.
    let marking = format!("touch ran\n{PRINTS_T}");
    let evil = plugins.script("evil", &marking).await;
    fs::create_dir(plugins.path("sub")).unwrap();
    let mut config = config(&evil);
    let policy = match trick {
        Trick::OtherScript => allow(&allowed),
        Trick::RelativePath => {
            config.command = format!("{}{}", "../".repeat(64), evil.display());
            allow(&evil)
        }
        Trick::Symlink => {
            let link = plugins.path("sub/allowed");
            std::os::unix::fs::symlink(&evil, &link).unwrap();
            config.command = link.display().to_string();
            allow(&allowed)
        }
        Trick::BareName => {
            config.command = "tether-test-no-such-plugin".to_owned();
            allow(&allowed)
        }
        Trick::NoPolicy => ExecPolicy::none(),
        Trick::Preload => {
            config.env = vec![ExecEnvVar::new("LD_PRELOAD", "x.so")];
            allow(&evil)
        }
    };
    let err = run_plugin(&config, &policy).await.unwrap_err();
    assert_eq!(err.condition_reason(), "ExecNotAllowed", "{err:?}");
    assert!(!plugins.path("ran").exists(), "{trick:?} ran the plugin");
}

#[tokio::test]
async fn the_marker_shows_a_run() {
    let plugins = Plugins::new();
    plugins
        .run(&format!("touch ran\n{PRINTS_T}"))
        .await
        .unwrap();
    assert!(plugins.path("ran").exists());
}
