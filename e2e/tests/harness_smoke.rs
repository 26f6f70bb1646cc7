//! Proves the testkit harness against the real kube-apiserver and etcd binaries.
//!
//! Each test starts its own environment (a few seconds) and drops it at the end, which stops
//! every process it started, also when the test fails.

use std::collections::HashSet;
use std::time::Instant;

use e2e::limits::HOUR;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use testkit::{Cluster, Environment, RestartOptions, client_for, status_code};

/// Lists namespaces at `endpoint` trusting only `ca_pem`, and returns the error: the TLS
/// handshake must fail, so there is no HTTP status.
async fn expect_tls_rejection(endpoint: &str, ca_pem: &str) -> String {
    let client = client_for(endpoint, ca_pem, None).unwrap();
    let err = Api::<Namespace>::all(client)
        .list_metadata(&ListParams::default().limit(1))
        .await
        .expect_err("a CA that did not sign the serving certificate must not verify it");
    assert_eq!(
        status_code(&err),
        None,
        "expected a TLS failure, got an HTTP answer: {err}"
    );
    let chain = anyhow::Error::from(err);
    let text = format!("{chain:#}");
    assert!(
        text.contains("UnknownIssuer") || text.contains("certificate"),
        "expected a certificate verification failure, got: {text}"
    );
    text
}

#[tokio::test]
async fn control_plane_and_two_members_come_up_with_distinct_cas() -> anyhow::Result<()> {
    let started = Instant::now();
    let env = Environment::with_members(2).await?;
    eprintln!("control plane + 2 members ready in {:?}", started.elapsed());

    let names: Vec<&str> = env.clusters().iter().map(Cluster::name).collect();
    assert_eq!(names, ["control-plane", "member1", "member2"]);
    for (i, cluster) in env.clusters().iter().enumerate() {
        let body = cluster.readyz().await?;
        assert!(
            body.contains("ok"),
            "{}: /readyz said {body:?}",
            cluster.name()
        );
        let rss = env.apiserver(i).unwrap().rss_bytes()?;
        eprintln!("{}: apiserver RSS {} MiB", cluster.name(), rss >> 20);
    }
    let cas: HashSet<&str> = env.clusters().iter().map(Cluster::ca_pem).collect();
    assert_eq!(cas.len(), 3, "every cluster has its own CA");

    let (m1, m2) = (&env.members()[0], &env.members()[1]);
    expect_tls_rejection(m2.endpoint(), m1.ca_pem()).await;
    Ok(())
}

#[tokio::test]
async fn minted_token_works_on_its_member_only_and_gets_401_after_revoke() -> anyhow::Result<()> {
    let env = Environment::with_members(2).await?;
    let (m1, m2) = (&env.members()[0], &env.members()[1]);
    let (ns, token) = m1.create_agent("smoke", "agent", HOUR).await?;

    // A plain kube client with only the token and member1's CA sees member1's namespaces.
    let listed = Api::<Namespace>::all(m1.client_with_token(&token)?)
        .list(&ListParams::default())
        .await?;
    let mut names = listed.iter().filter_map(|n| n.metadata.name.as_deref());
    assert!(
        names.any(|n| n == ns),
        "the agent's own namespace {ns} is listed"
    );

    // member2 has its own signing key and issuer: the token is not even authenticated there.
    assert_eq!(m2.token_status(&token).await?, 401, "member2 rejects it");

    let took = m1.revoke(&ns, "agent", &token).await?;
    eprintln!("revocation observed after {took:?}");
    let revoked = m1.token_status(&token).await?;
    assert_eq!(revoked, 401, "a revoked token is rejected");
    Ok(())
}

#[tokio::test]
async fn deployment_status_patched_through_the_subresource_reads_back() -> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let member = &env.members()[0];
    let ns = member.create_namespace("workload").await?;
    let client = member.admin_client()?;
    let api = Api::<Deployment>::namespaced(client.clone(), &ns);
    api.create(&PostParams::default(), &testkit::deployment(&ns, "web", 3))
        .await?;

    let patched = testkit::set_deployment_status(&client, &ns, "web", 2).await?;
    assert_eq!(patched.status.unwrap().ready_replicas, Some(2));

    let read = api.get_status("web").await?;
    let status = read.status.unwrap();
    assert_eq!(status.ready_replicas, Some(2));
    assert_eq!(status.replicas, Some(3));
    assert_eq!(status.observed_generation, read.metadata.generation);
    Ok(())
}

#[tokio::test]
async fn restart_with_a_new_ca_rotates_trust_and_keeps_tokens() -> anyhow::Result<()> {
    let mut env = Environment::with_members(1).await?;
    let member = env.cluster(1).clone();
    let (_ns, token) = member.create_agent("smoke", "agent", HOUR).await?;
    let old_pid = env.apiserver(1).unwrap().pid();

    let began = Instant::now();
    env.restart(1, RestartOptions::new_ca()).await?;
    let restart = began.elapsed();

    let rotated = env.cluster(1);
    let endpoint = rotated.endpoint();
    assert_eq!(endpoint, member.endpoint(), "same port after restart");
    assert_ne!(rotated.ca_pem(), member.ca_pem(), "a new CA");
    assert_ne!(env.apiserver(1).unwrap().pid(), old_pid, "a new process");
    expect_tls_rejection(rotated.endpoint(), member.ca_pem()).await;
    let old_token = rotated.token_status(&token).await?;
    assert_eq!(old_token, 200, "the old token still works");
    eprintln!("restart with a new CA took {restart:?}");

    // Stopped: unreachable (no HTTP answer at all). Started again: the token works.
    let rotated = rotated.clone();
    env.stop(1).await?;
    assert!(env.apiserver(1).is_none());
    let err = rotated
        .token_status(&token)
        .await
        .expect_err("a stopped member is unreachable");
    assert!(
        format!("{err:#}").contains("onnect"),
        "expected a connect error: {err:#}"
    );
    env.start(1).await?;
    assert_eq!(rotated.token_status(&token).await?, 200);
    Ok(())
}
