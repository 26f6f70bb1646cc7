//! A member defined in a directory flows through cluster-registry into the collector and
//! member-client, and each broken input is reported with its own reason on the read API, with
//! no apiserver anywhere: the member's endpoint is a closed loopback port.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::{net::SocketAddr, path::Path, time::Duration};

use clap::Parser as _;
use collector::cli::Args;
use serde_json::Value;
use testkit::eventually;

fn write(path: &Path, content: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The `Ready` and `CredentialsValid` conditions of `member`, as (status, reason) pairs.
async fn conditions(addr: SocketAddr, member: &str) -> Option<Vec<(String, String)>> {
    let (code, body) = testkit::http_get(addr, &format!("/api/v1/clusters/{member}"))
        .await
        .ok()?;
    if code != 200 {
        return None;
    }
    let cluster: Value = serde_json::from_str(&body).ok()?;
    let text = |c: &Value, k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some(
        cluster["conditions"]
            .as_array()?
            .iter()
            .map(|c| (text(c, "status"), text(c, "reason")))
            .collect(),
    )
}

/// Polls the read API until `member`'s `Ready` reason is `reason`; returns both conditions.
async fn wait_reason(addr: SocketAddr, member: &str, reason: &str) -> Vec<(String, String)> {
    let what = format!("{member}'s Ready reason is {reason}");
    eventually(&what, Duration::from_secs(20), || async {
        match conditions(addr, member).await {
            Some(now) if now[0].1 == reason => Ok(now),
            now => Err(format!("{now:?}")),
        }
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn directory_member_failures_reach_the_read_api_with_their_own_reasons() {
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

    let collector = Collector::start(dir.path()).await;
    let addr = collector.addr;

    // Nothing listens there: unreachable, and not an auth failure.
    let seen = wait_reason(addr, "m1", "Unreachable").await;
    assert_eq!(seen[1], ("Unknown".to_owned(), "Unreachable".to_owned()));

    // An empty token file: the credential is unusable, whatever the network says.
    write(&token, "  \n");
    let seen = wait_reason(addr, "m1", "SecretInvalid").await;
    assert_eq!(seen[1], ("False".to_owned(), "SecretInvalid".to_owned()));

    // No token file at all.
    std::fs::remove_file(&token).unwrap();
    let seen = wait_reason(addr, "m1", "SecretNotFound").await;
    assert_eq!(seen[0], ("False".to_owned(), "SecretNotFound".to_owned()));

    // Fixed again: back to what the network says.
    write(&token, "b-token\n");
    wait_reason(addr, "m1", "Unreachable").await;

    collector.stop().await;
}

#[tokio::test]
async fn each_unusable_definition_gets_its_own_reason_and_spares_the_others() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("https://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("t"), "a-token\n");
    write(&dir.path().join("not-pem.crt"), "not a certificate\n");
    let member = |name: &str, extra: &str| {
        let yaml = format!("name: {name}\napiEndpoint: {endpoint}\ntokenFile: t\n{extra}");
        write(&dir.path().join(format!("{name}.yaml")), &yaml);
    };
    member("good", "insecureSkipTLSVerification: true\n");
    member("socks", "proxyURL: socks5://127.0.0.1:1080\n");
    member("bad-ca", "caFile: not-pem.crt\n");
    write(
        &dir.path().join("plain.yaml"),
        "name: plain\napiEndpoint: http://127.0.0.1:1\ntokenFile: t\n",
    );
    write(
        &dir.path().join("typo.yaml"),
        "name: typo\napiEndpoint: https://h\ntokenfile: t\n",
    );

    // Refused before anything is dialled.
    write(
        &dir.path().join("meta.yaml"),
        "name: meta\napiEndpoint: https://169.254.169.254\ntokenFile: t\n",
    );
    write(
        &dir.path().join("escape.yaml"),
        &format!(
            "name: escape\napiEndpoint: {endpoint}\ntokenFile: ../t\ninsecureSkipTLSVerification: true\n"
        ),
    );

    let collector = Collector::start(dir.path()).await;
    for (name, reason, credentials_valid) in [
        ("socks", "ProxyInvalid", "Unknown"),
        ("plain", "EndpointForbidden", "Unknown"),
        ("meta", "EndpointForbidden", "Unknown"),
        ("escape", "SecretInvalid", "False"),
        ("typo", "DefinitionInvalid", "Unknown"),
        ("bad-ca", "SecretInvalid", "False"),
        ("good", "Unreachable", "Unknown"),
    ] {
        let seen = wait_reason(collector.addr, name, reason).await;
        assert_eq!(seen[0].0, "False", "{name}: {seen:?}");
        assert_eq!(
            seen[1],
            (credentials_valid.to_owned(), reason.to_owned()),
            "{name}"
        );
    }
    collector.stop().await;
}

#[tokio::test]
async fn loopback_and_insecure_members_need_their_opt_ins() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("t"), "a-token\n");
    write(
        &dir.path().join("local.yaml"),
        "name: local\napiEndpoint: https://127.0.0.1:1\ntokenFile: t\n",
    );
    write(
        &dir.path().join("insecure.yaml"),
        "name: insecure\napiEndpoint: https://10.0.0.1:1\ntokenFile: t\ninsecureSkipTLSVerification: true\n",
    );
    let collector = Collector::start_with(dir.path(), &[]).await;
    for name in ["local", "insecure"] {
        let seen = wait_reason(collector.addr, name, "EndpointForbidden").await;
        assert_eq!(
            seen[1],
            ("Unknown".to_owned(), "EndpointForbidden".to_owned())
        );
    }
    collector.stop().await;
}

/// The collector run in this process on a members directory, probing every second.
struct Collector {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    running: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Collector {
    /// With the opt-ins these tests' loopback members need.
    async fn start(dir: &Path) -> Self {
        let opt_ins = [
            "--allow-endpoint",
            "127.0.0.1/32",
            "--allow-insecure-members",
        ];
        Self::start_with(dir, &opt_ins).await
    }

    async fn start_with(dir: &Path, extra: &[&str]) -> Self {
        let addr = testkit::free_loopback_addr().unwrap();
        let listen = addr.to_string();
        let mut argv = vec![
            "collector",
            "--members-from",
            "directory",
            "--members-dir",
            dir.to_str().unwrap(),
            "--listen",
            &listen,
            "--probe-listen",
            "127.0.0.1:0",
            "--insecure-plain-http-listen",
            "--probe-period",
            "1",
            // No control plane to review readers against: the API is served openly.
            "--insecure-serve-api",
        ];
        argv.extend_from_slice(extra);
        let args = Args::try_parse_from(argv).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(collector::app::run(args, async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            stop,
            running,
        }
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(10), self.running).await;
        assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
    }
}
