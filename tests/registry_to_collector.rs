//! A member defined in a directory flows through cluster-registry into the collector's
//! supervisor and member-client, and each broken input is reported with its own reason, with no
//! apiserver anywhere: the member's endpoint is a closed loopback port.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::{path::Path, sync::Arc, time::Duration};

use cluster_registry::{DirectoryConfig, RegistryBuilder};
use collector::{
    member_health::MemberHealth, member_task::Shared, metrics::Metrics, mirror::Mirror,
    supervisor::Supervisor,
};
use member_client::ClientFactory;

fn write(path: &Path, content: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Polls the mirror until `member`'s health has `reason`.
async fn wait_reason(mirror: &Mirror, member: &str, reason: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = mirror.status(member).map(|s| s.health().clone());
        if now.as_ref().is_some_and(|h| h.reason() == reason) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{member} never became {reason}: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn directory_member_failures_reach_the_collector_with_their_own_reasons() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("https://{}", closed.local_addr().unwrap());
    drop(closed);

    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("m1.token");
    write(&token, "a-token\n");
    write(
        &dir.path().join("m1.yaml"),
        &format!(
            "name: m1\napiEndpoint: {endpoint}\ntokenFile: m1.token\ninsecureSkipTLSVerification: true\n"
        ),
    );

    let (registry, events, driver) = RegistryBuilder::new()
        .directory(DirectoryConfig::new(dir.path()).poll_interval(Duration::from_millis(100)))
        .build();
    let mirror = Mirror::default();
    let shared = Shared {
        mirror: mirror.clone(),
        metrics: Metrics::new(),
        status_writer: None,
        probe_period: Duration::from_millis(200),
        resources: Arc::from(Vec::new()),
    };
    let supervisor = Supervisor::new(ClientFactory::new(registry.tokens().clone()), shared);
    let running = tokio::spawn(async move {
        tokio::select! {
            () = driver.run() => {}
            () = supervisor.run(events) => {}
        }
    });

    // Nothing listens there: unreachable, and not an auth failure.
    wait_reason(&mirror, "m1", "Unreachable").await;
    let health = mirror.status("m1").unwrap().health().clone();
    assert_eq!(health.credentials_valid_status(), "Unknown");

    // An empty token file: the credential is unusable, whatever the network says.
    write(&token, "  \n");
    wait_reason(&mirror, "m1", "SecretInvalid").await;

    // No token file at all.
    std::fs::remove_file(&token).unwrap();
    wait_reason(&mirror, "m1", "SecretNotFound").await;
    assert_eq!(
        mirror.status("m1").unwrap().health(),
        &MemberHealth::SecretNotFound
    );

    // Fixed again: back to what the network says.
    write(&token, "b-token\n");
    wait_reason(&mirror, "m1", "Unreachable").await;
    running.abort();
}
