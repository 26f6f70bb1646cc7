//! A live demonstration on real apiservers: a control plane and two members, the collector
//! watching them, a token rotated and revoked under it, a Secret broken and fixed. Run it with
//! `hack/demo.sh`; Ctrl-C stops everything it started.

use std::time::Duration;

use anyhow::Context as _;
use e2e::{limits::HOUR, scenario::Scenario};
use k8s_openapi::{ByteString, api::apps::v1::Deployment};
use kube::Api;
use testkit::RestartOptions;

const PROBE: Duration = Duration::from_secs(2);
const WAIT: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                "warn,kube_client=off,kube_runtime=error,kube_lease_manager=error".into()
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    tokio::select! {
        result = demo() => result,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("\ninterrupted: stopping the collector and the apiservers");
            Ok(())
        }
    }
}

async fn demo() -> anyhow::Result<()> {
    step("Starting etcd, a control plane and two member kube-apiservers, and the collector");
    let mut s = Scenario::start(2, PROBE).await?;
    for i in 1..=2 {
        s.create_deployment(i, "web", 2).await?;
    }
    for member in ["member1", "member2"] {
        s.karmada
            .wait_condition(member, "Ready", "True/MemberReady", WAIT)
            .await?;
        s.wait_mirrored(member, "web", 2, WAIT).await?;
    }
    table(&s).await?;

    step("member1: rotate the token in its Secret, revoke the old one, restart its apiserver");
    let ns = s.namespace.clone();
    let member1 = s.member(1).clone();
    let new_token = member1.mint_token(&ns, "agent-b", HOUR).await?;
    s.karmada
        .write_secret("member1", &new_token, member1.ca_pem())
        .await?;
    let old = s.registered_tokens[0].clone();
    let took = member1.revoke(&ns, "agent-a", &old).await?;
    println!(
        "  old token revoked (401 after {took:.1?}); restarting member1 so every watch reconnects"
    );
    s.env.restart(1, RestartOptions::default()).await?;
    s.set_ready(1, "web", 3).await?;
    let took = s.wait_mirrored("member1", "web", 3, WAIT).await?;
    println!(
        "  the collector mirrored member1's new Deployment status {took:.1?} after it changed"
    );
    s.karmada
        .wait_condition("member1", "Ready", "True/MemberReady", WAIT)
        .await?;
    table(&s).await?;

    step("member2: write garbage into its Secret");
    let garbage = [("token".to_owned(), ByteString(b"\n".to_vec()))]
        .into_iter()
        .collect();
    s.karmada.write_secret_data("member2", garbage).await?;
    s.karmada
        .wait_condition("member2", "CredentialsValid", "False/SecretInvalid", WAIT)
        .await?;
    table(&s).await?;

    step("member2: write a valid token again");
    let token = s.member(2).mint_token(&ns, "agent-a", HOUR).await?;
    let ca = s.member(2).ca_pem().to_owned();
    s.karmada.write_secret("member2", &token, &ca).await?;
    s.karmada
        .wait_condition("member2", "Ready", "True/MemberReady", WAIT)
        .await?;
    table(&s).await?;

    step("Done: rotation survived without a restart, and a bad credential was reported as such");
    s.collector.stop().await;
    Ok(())
}

fn step(text: &str) {
    println!("\n==> {text}");
}

async fn table(s: &Scenario) -> anyhow::Result<()> {
    println!(
        "  {:<8}  {:<6}  {:<16}  {:<20}  {:>15}",
        "MEMBER", "READY", "CREDENTIALSVALID", "REASON", "WEB READY (M/L)"
    );
    for (i, member) in ["member1", "member2"].iter().enumerate() {
        let ready = s
            .karmada
            .condition(member, "Ready")
            .await?
            .unwrap_or_default();
        let credentials = s
            .karmada
            .condition(member, "CredentialsValid")
            .await?
            .unwrap_or_default();
        let mirrored = s.mirrored_ready(member, "web").await.ok().flatten();
        let live = Api::<Deployment>::namespaced(s.member(i + 1).admin_client()?, &s.namespace)
            .get("web")
            .await
            .context("reading the live Deployment")?
            .status
            .and_then(|status| status.ready_replicas);
        println!(
            "  {:<8}  {:<6}  {:<16}  {:<20}  {:>7}/{:<7}",
            member,
            ready.0,
            credentials.0,
            credentials.1,
            mirrored.map_or("-".to_owned(), |n| n.to_string()),
            live.map_or("-".to_owned(), |n| n.to_string()),
        );
    }
    Ok(())
}
