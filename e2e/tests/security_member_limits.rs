//! A member cannot exhaust the collector's memory. The real `collector` binary reads member
//! files: one member is a real apiserver with a Deployment, the others are hostile endpoints on
//! 127.0.0.2 that each misbehave one way:
//!
//! - a `/readyz` that streams 300 MiB;
//! - lists (Nodes, Deployments) that ignore `limit` and stream 300 MiB of items;
//! - lists that hand out `continue` tokens page after page, with 100 objects a page;
//! - lists that hand out `continue` tokens for empty pages;
//! - a watch that streams 300 MiB without a newline;
//! - a `/version` that sends one byte a second.
//!
//! The collector's RSS (`/proc/<pid>/status`), sampled throughout, stays within a bound of its
//! own baseline measured in the same run before the hostile members arrive; every hostile
//! member is `Ready=False` with a reason that names the limit it broke; and the real member
//! keeps mirroring (a change of its Deployment shows in the read API).
//!
//! Build the binary first: `cargo build -p collector --bin collector`.

use std::{
    collections::BTreeMap,
    net::Ipv4Addr,
    path::{Path, PathBuf},
    time::Duration,
};

use e2e::{
    collector_run::{spawn_healthy, temp_dir},
    kubeconfig_plane::read_api::process_condition,
};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use testkit::{
    CollectorProcess, Environment, HostileEndpoint, Misbehaviour, eventually, matching,
    proc_status_bytes,
};
use tokio::time::Instant;

const START: Duration = Duration::from_secs(60);
/// How long the hostile members get to break their limits, and the real one to mirror.
const CONVERGE: Duration = Duration::from_secs(90);
const MIB: u64 = 1024 * 1024;
/// What each hostile stream sends: the size of the attack the issue observed, bounded so
/// that a collector without limits is hurt but the machine is not.
const HOSTILE_BYTES: u64 = 300 * MIB;
/// The most the collector's RSS may grow over its baseline while the hostile members attack.
const RSS_GROWTH_BOUND: u64 = 250 * MIB;
/// A cap on objects small enough to reach in seconds (the default is 100,000).
const MAX_OBJECTS: &str = "20000";

/// `status/reason: message` of `member`'s `Ready` condition, if the read API shows one.
async fn ready(process: &CollectorProcess, member: &str) -> Option<(String, String, String)> {
    let found = process_condition(process, member, "Ready").await?;
    Some((found.status, found.reason, found.message))
}

/// Writes member file `name.yaml` for `endpoint` under the CA in `ca_file`, with the token
/// `token` in `name.token`.
fn write_member(dir: &Path, name: &str, endpoint: &str, ca_pem: &str, token: &str) {
    std::fs::write(dir.join(format!("{name}.token")), token).unwrap();
    std::fs::write(dir.join(format!("{name}-ca.crt")), ca_pem).unwrap();
    let text = format!(
        "name: {name}\napiEndpoint: {endpoint}\ntokenFile: {name}.token\ncaFile: {name}-ca.crt\n"
    );
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(format!("{name}.yaml"))).unwrap();
}

/// The hostile members: name, what it does, and the reason it must get.
#[rustfmt::skip]
fn attacks() -> Vec<(&'static str, Misbehaviour, &'static str)> {
    use Misbehaviour::*;
    vec![
        ("huge-readyz", HugeReadyz { bytes: HOSTILE_BYTES }, "ResponseTooLarge"),
        ("endless-list", EndlessList { bytes: HOSTILE_BYTES }, "ResponseTooLarge"),
        ("endless-continue", EndlessContinue { items: 100, pages: 5_000 }, "TooManyObjects"),
        ("empty-pages", EndlessContinue { items: 0, pages: 100_000 }, "TooManyListPages"),
        ("no-newline", WatchWithoutNewline { bytes: HOSTILE_BYTES }, "WatchLineTooLong"),
        ("trickling-version", TricklingVersion, "ResponseTooSlow"),
    ]
}

#[tokio::test]
async fn hostile_members_cannot_exhaust_the_collectors_memory() -> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let member = env.cluster(1);
    let ns = format!("limits-{}", std::process::id());
    member.create_namespace_named(&ns).await?;
    let deployments: Api<Deployment> = Api::namespaced(member.admin_client()?, &ns);
    deployments
        .create(&PostParams::default(), &testkit::deployment(&ns, "web", 1))
        .await?;

    let dir = temp_dir("member-limits")?;
    let members: PathBuf = dir.join("members");
    std::fs::create_dir(&members)?;
    let token = member.admin_token()?;
    write_member(&members, "real", member.endpoint(), member.ca_pem(), &token);

    let mut hostiles = Vec::new();
    for (name, misbehaviour, reason) in attacks() {
        let endpoint = HostileEndpoint::start(Ipv4Addr::new(127, 0, 0, 2)).await?;
        endpoint.misbehave(misbehaviour);
        hostiles.push((name, endpoint, reason));
    }
    let (members_dir, allow) = (
        members.display().to_string(),
        hostiles[0].1.allow_endpoint_arg(),
    );
    let source = ["--members-from", "directory", "--members-dir", &members_dir];
    let serve = ["--insecure-serve-api", "--probe-period", "1"];
    let limits = [
        "--allow-endpoint",
        &allow,
        "--member-max-objects",
        MAX_OBJECTS,
    ];
    let args = [&source[..], &serve, &limits].concat();
    let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let mut collector = spawn_healthy(&args, &logs, START).await?;
    let pid = collector.pid();

    // The baseline: the real member mirrored, nothing hostile yet.
    let what = format!("the real member is ready (logs in {})", logs.display());
    eventually(&what, START, || async {
        let now = ready(&collector, "real").await;
        matching(now, |now| now.as_ref().is_some_and(|r| r.0 == "True"))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let baseline = proc_status_bytes(pid, "VmRSS")?;
    eprintln!("baseline RSS: {} MiB", baseline / MIB);

    // The attack.
    for (name, endpoint, _) in &hostiles {
        write_member(
            &members,
            name,
            &endpoint.url(),
            endpoint.ca_pem(),
            "any-token",
        );
    }
    let mut peak = baseline;
    let mut reasons: BTreeMap<&str, Option<(String, String, String)>> = BTreeMap::new();
    let mut scaled = false;
    let mut mirrored = false;
    let started = Instant::now();
    loop {
        assert!(
            collector.running(),
            "the collector died under attack (peak RSS seen {} MiB; logs in {})",
            peak / MIB,
            logs.display()
        );
        peak = peak.max(proc_status_bytes(pid, "VmRSS")?);
        for (name, _, _) in &hostiles {
            reasons.insert(name, ready(&collector, name).await);
        }
        let all_refused = hostiles.iter().all(|(name, _, reason)| {
            reasons[name]
                .as_ref()
                .is_some_and(|(status, got, _)| status == "False" && got == reason)
        });
        // The real member keeps mirroring while the others attack.
        if !scaled && started.elapsed() > Duration::from_secs(10) {
            let patch = serde_json::json!({"spec": {"replicas": 3}});
            deployments
                .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            scaled = true;
        }
        if scaled && !mirrored {
            let path = "/api/v1/clusters/real/apps/v1/deployments";
            if let Ok((200, body)) = collector.get(path).await {
                mirrored = body.contains(&ns) && body.contains(r#""replicas":3"#);
            }
        }
        // Some time under attack whatever happens: the streams take a while to hurt.
        let done = all_refused && mirrored && started.elapsed() > Duration::from_secs(30);
        if done || started.elapsed() > CONVERGE {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rss = proc_status_bytes(pid, "VmRSS")?;
    let hwm = proc_status_bytes(pid, "VmHWM")?;
    eprintln!(
        "RSS under attack: baseline {} MiB, peak sampled {} MiB, now {} MiB, VmHWM {} MiB",
        baseline / MIB,
        peak / MIB,
        rss / MIB,
        hwm / MIB
    );
    for (name, _, reason) in &hostiles {
        eprintln!("{name}: want {reason}, got {:?}", reasons[name]);
    }
    let peak = peak.max(hwm);
    assert!(
        peak < baseline + RSS_GROWTH_BOUND,
        "the collector's RSS went from {} MiB to {} MiB under the hostile members (logs in {})",
        baseline / MIB,
        peak / MIB,
        logs.display()
    );
    for (name, _, reason) in &hostiles {
        let got = reasons[name].clone().unwrap_or_default();
        assert_eq!(
            (got.0.as_str(), got.1.as_str()),
            ("False", *reason),
            "{name}: {}",
            got.2
        );
        assert!(got.2.contains("limit"), "{name}: {}", got.2);
    }
    assert!(
        mirrored,
        "the real member's Deployment change never reached the mirror"
    );
    assert_eq!(
        ready(&collector, "real").await.map(|r| (r.0, r.1)),
        Some(("True".to_owned(), "MemberReady".to_owned())),
        "the real member is untouched"
    );
    Ok(())
}
