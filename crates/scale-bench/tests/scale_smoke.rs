//! The scale bench's collector phases (run in full by `hack/bench.sh`) with 20 members instead
//! of 1,000: the same code, through the crate's library. It asserts the correctness goals and
//! no timing: every member Ready, then after a mass rotation (new ServiceAccount tokens in every
//! Secret, old ServiceAccounts deleted) every switch seen, exactly one token fetch per rotated
//! Secret, no relist, no 401 and no `CredentialsValid=False`; and connections counted, for the
//! collector with HTTP/2 and a second with `--member-http2=false`.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use std::time::Duration;

use scale_bench::scale::{
    connections,
    fleet::Fleet,
    run::{self, PhaseOptions},
};

const MEMBERS: usize = 20;

/// Builds the collector binary of this profile (a no-op when it is fresh) and returns its path;
/// the bench proper uses the release build made by `hack/bench.sh`.
fn collector_binary() -> std::path::PathBuf {
    if std::env::var_os(testkit::COLLECTOR_BIN_ENV).is_none() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = std::process::Command::new(cargo)
            .args(["build", "--quiet", "-p", "collector", "--bin", "collector"])
            .status()
            .unwrap_or_else(|err| panic!("running cargo build -p collector: {err}"));
        assert!(status.success(), "cargo build -p collector failed");
    }
    testkit::locate_collector().unwrap()
}

#[tokio::test]
async fn twenty_members_ready_then_mass_rotation_without_refetch_relist_or_rejection() {
    let bin = collector_binary();
    let mut fleet = Fleet::start(MEMBERS, 3, 8).await.unwrap();
    let options = PhaseOptions {
        probe_period: Duration::from_secs(2),
        ready_limit: Duration::from_secs(120),
        settle: Duration::from_secs(1),
        window: Duration::from_secs(3),
        rotation_limit: Duration::from_secs(60),
    };

    let (running, scale) = run::scale(&fleet, &bin, &options).await.unwrap();
    eprintln!("scale: {scale:?}");
    assert_eq!(scale.ready_count, MEMBERS, "{scale:?}");
    assert!(scale.all_ready.is_some(), "{scale:?}");
    assert_eq!(
        scale.fetches_per_second, 0.0,
        "steady state reads no Secret: {scale:?}"
    );

    let rotation = run::rotate_all(&mut fleet, &running, &options)
        .await
        .unwrap();
    let warnings = running.log.warnings();
    eprintln!("rotation: {rotation:?}");
    assert_eq!(rotation.not_switched, 0, "{rotation:?}");
    assert_eq!(
        rotation.fetches_per_secret(),
        1.0,
        "one fetch per rotated Secret: {rotation:?}"
    );
    assert_eq!(rotation.relists, 0.0, "{rotation:?}");
    assert_eq!(rotation.unauthorized, 0.0, "{rotation:?} {warnings:?}");
    assert!(
        rotation.credentials_false.is_empty(),
        "{rotation:?} {warnings:?}"
    );
    // Every member kept being probed with its new token after its old one was rejected.
    assert_eq!(running.conditions.ready(), MEMBERS);
    drop(running);

    // Connections, as section 6 counts them: every member holds at least one over HTTP/2, and at
    // least one per watch (Nodes, Deployments) over HTTP/1.1, where a watch takes a connection.
    let members = connections::members_per_apiserver(&fleet);
    let http2 = scale.connections.steady().per_apiserver;
    assert!(
        http2.iter().zip(&members).all(|(held, m)| held >= m),
        "{http2:?} for {members:?}"
    );
    let (http1, _) = run::without_http2(&fleet, &bin, &options).await.unwrap();
    eprintln!("HTTP/1.1: {http1:?}");
    assert!(http1.all_ready.is_some(), "{http1:?}");
    let held = http1.steady().per_apiserver;
    assert!(
        held.iter().zip(&members).all(|(held, m)| *held >= 2 * m),
        "{held:?} for {members:?}"
    );
}
