//! One connection per member: over HTTP/2 the collector carries every watch, probe and request
//! of a member on one TLS connection, counted from its socket table; with `--member-http2=false`
//! each watch holds a connection of its own. A member whose apiserver allows fewer concurrent
//! streams than the collector has watches on it gets a second connection, not a queue.

use std::time::Duration;

use e2e::{
    collector_run::{admin_args, process_metric, spawn_healthy, temp_dir},
    limits::{HOUR, START},
    scenario::{karmada_environment, karmada_environment_from},
};
use testkit::{CollectorProcess, Environment, Karmada, PushMember, eventually};

const MEMBERS: usize = 2;
/// Deployments, ConfigMaps and Services, with the Nodes every member has watched: four
/// watches per member, and a probe every second.
const MIRROR: &str = "apps/v1/deployments,v1/configmaps,v1/services";

/// The established connections `collector` holds to each member's apiserver.
fn connections_per_member(env: &Environment, collector: &CollectorProcess) -> Vec<usize> {
    env.members()
        .iter()
        .map(|member| {
            let port = member.endpoint().rsplit(':').next().unwrap_or_default();
            let port = port.trim_end_matches('/').parse().unwrap();
            testkit::established_connections(collector.pid(), port)
        })
        .collect()
}

async fn collector(env: &Environment, name: &str, http2: &str) -> CollectorProcess {
    let mut args = admin_args(env.control_plane()).unwrap();
    let flags = [
        "--insecure-serve-api",
        "--leader-elect=false",
        "--probe-period",
        "1",
        "--mirror",
        MIRROR,
        "--member-http2",
        http2,
        // Two collectors watch the same fleet; only the first writes status.
        "--write-status",
        if http2 == "true" { "true" } else { "false" },
    ];
    args.extend(flags.iter().map(|flag| (*flag).to_owned()));
    let process = spawn_healthy(&args, &temp_dir(name).unwrap(), START)
        .await
        .unwrap();
    eventually("every member is Ready", START, || async {
        process_metric(&process, "tether_member_ready", "")
            .await
            .ok()
            == Some(MEMBERS as f64)
    })
    .await
    .unwrap();
    process
}

/// Registers every member of `env` in push mode, with a token of its own ServiceAccount.
async fn register(env: &Environment, karmada: &Karmada) -> anyhow::Result<()> {
    for member in env.members() {
        member.create_namespace_named("agents").await?;
        member.create_service_account("agents", "agent").await?;
        let token = member.mint_token("agents", "agent", HOUR).await?;
        karmada.register(&PushMember::of(member, &token)).await?;
    }
    Ok(())
}

#[tokio::test]
async fn over_http2_each_member_gets_one_connection() -> anyhow::Result<()> {
    let (env, karmada) = karmada_environment(MEMBERS).await?;
    register(&env, &karmada).await?;

    let http2 = collector(&env, "http2", "true").await;
    let http1 = collector(&env, "http1", "false").await;
    // A few probe periods, so that every watch is open and probes have come and gone.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (over_http2, over_http1) = (
        connections_per_member(&env, &http2),
        connections_per_member(&env, &http1),
    );
    println!("connections per member: HTTP/2 {over_http2:?}, HTTP/1.1 {over_http1:?}");
    assert_eq!(
        over_http2,
        vec![1; MEMBERS],
        "four watches and the probes, one connection"
    );
    for n in over_http1 {
        assert!(n >= 4, "HTTP/1.1: a connection per watch, {n} here");
    }
    Ok(())
}

/// hyper's own pool would queue the fourth watch behind the other three for as long as they
/// stay open, and the member would never be Ready.
#[tokio::test]
async fn a_member_allowing_fewer_streams_than_its_watches_gets_another_connection()
-> anyhow::Result<()> {
    let config = testkit::Config::default().members(MEMBERS);
    let config = config.apiserver_flag("--http2-max-streams-per-connection=3");
    let (env, karmada) = karmada_environment_from(config).await?;
    register(&env, &karmada).await?;

    // Ready: all four watches have listed.
    let http2 = collector(&env, "three-streams", "true").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let connections = connections_per_member(&env, &http2);
    println!("connections per member at 3 streams per connection: {connections:?}");
    for n in connections {
        assert!(
            (2..=3).contains(&n),
            "four watches at three streams each: {n}"
        );
    }
    Ok(())
}
