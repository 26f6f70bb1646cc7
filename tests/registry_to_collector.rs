//! A member defined in a directory flows through cluster-registry into the collector and
//! member-client, and each broken input is reported with its own reason on the read API, with
//! no apiserver anywhere: the member's endpoint is a closed loopback port.

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
    let path = format!("/api/v1/clusters/{member}");
    let (200, body) = testkit::http_get(addr, &path).await.ok()? else {
        return None;
    };
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

/// `https://` and a loopback port nothing listens on.
fn closed_endpoint() -> String {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("https://{}", closed.local_addr().unwrap())
}

#[tokio::test]
async fn directory_member_failures_reach_the_read_api_with_their_own_reasons() {
    let endpoint = closed_endpoint();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("m1.token");
    write(&token, "a-token\n");
    write(
        &dir.path().join("m1.yaml"),
        &format!(
            "name: m1\napiEndpoint: {endpoint}\ntokenFile: m1.token\ninsecureSkipTLSVerification: true\n"
        ),
    );

    let collector = Collector::start(dir.path(), OPT_INS).await;
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

/// The rest of a member file that reads token file `t` and skips TLS verification.
const INSECURE: &str = "tokenFile: t\ninsecureSkipTLSVerification: true\n";

/// A member file: its name, endpoint and the rest of its YAML, then the `Ready` reason it
/// gets (with `Ready=False`) and the status of its `CredentialsValid`, which has that reason too.
type Expected<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str);

/// Writes token file `t` and each member file, starts a collector with `opt_ins`, and checks
/// every member's conditions.
async fn each_member_gets_its_reason(opt_ins: &[&str], members: &[Expected<'_>]) {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("t"), "a-token\n");
    write(&dir.path().join("not-pem.crt"), "not a certificate\n");
    for (name, endpoint, rest, ..) in members {
        let yaml = format!("name: {name}\napiEndpoint: {endpoint}\n{rest}");
        write(&dir.path().join(format!("{name}.yaml")), &yaml);
    }
    let collector = Collector::start(dir.path(), opt_ins).await;
    for &(name, _, _, reason, credentials_valid) in members {
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
async fn each_unusable_definition_gets_its_own_reason_and_spares_the_others() {
    let endpoint = &*closed_endpoint();
    let token = "tokenFile: t\n";
    #[rustfmt::skip]
    let members = [
        ("socks", endpoint, "tokenFile: t\nproxyURL: socks5://127.0.0.1:1080\n", "ProxyInvalid", "Unknown"),
        ("plain", "http://127.0.0.1:1", token, "EndpointForbidden", "Unknown"),
        ("typo", "https://h", "tokenfile: t\n", "DefinitionInvalid", "Unknown"),
        // Refused before anything is dialled.
        ("meta", "https://169.254.169.254", token, "EndpointForbidden", "Unknown"),
        ("escape", endpoint, "tokenFile: ../t\ninsecureSkipTLSVerification: true\n", "SecretInvalid", "False"),
        ("bad-ca", endpoint, "tokenFile: t\ncaFile: not-pem.crt\n", "SecretInvalid", "False"),
        ("good", endpoint, INSECURE, "Unreachable", "Unknown"),
    ];
    each_member_gets_its_reason(OPT_INS, &members).await;
}

#[tokio::test]
async fn loopback_and_insecure_members_need_their_opt_ins() {
    #[rustfmt::skip]
    let members = [
        ("local", "https://127.0.0.1:1", "tokenFile: t\n", "EndpointForbidden", "Unknown"),
        ("insecure", "https://10.0.0.1:1", INSECURE, "EndpointForbidden", "Unknown"),
    ];
    each_member_gets_its_reason(&[], &members).await;
}

/// The opt-ins these tests' loopback and insecure members need.
const OPT_INS: &[&str] = &[
    "--allow-endpoint",
    "127.0.0.1/32",
    "--allow-insecure-members",
];

/// The collector run in this process on a members directory, probing every second.
struct Collector {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    running: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Collector {
    async fn start(dir: &Path, extra: &[&str]) -> Self {
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
