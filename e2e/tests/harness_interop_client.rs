//! A real client-go consumer of SIG-Multicluster ClusterProfiles
//! (`e2e/interop/clusterprofile-client`, built by `hack/interop.sh`) against real
//! kube-apiservers: it reads a ClusterProfile published the way Open Cluster Management does,
//! picks the provider its provider file names, and reaches the member through client-go's exec
//! credential machinery (KEP-541), which runs `e2e/plugins/secretreader-plugin.py` with the
//! profile's `client.authentication.k8s.io/exec` extension as `spec.cluster.config`. The
//! profile is written in the producer's format, not through Tether's types, against the CRD
//! Tether ships (`deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml`): both must serve
//! a consumer other than Tether.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use e2e::collector_run::temp_dir;
use e2e::interop_client::{self, ProfileRef, is_added, is_list_with};
use e2e::kubeconfig_plane::Kubeconfig;
use e2e::limits::HOUR;
use e2e::profile_plane::{OCM_MANAGER as OCM, ProfilePlane};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use testkit::{Cluster, Environment, deployment};
use tokio::process::Command;
use tokio::time::Instant;

/// The Go program and what it needs: the control plane's kubeconfig (admin), and provider
/// files naming the secretreader plugin: the plane's, under OCM's provider name, and one
/// under a name no profile offers.
struct Consumer {
    kubeconfig: PathBuf,
    providers: PathBuf,
    other_providers: PathBuf,
    namespace: String,
}

impl Consumer {
    fn new(plane: &ProfilePlane, control_plane: &Cluster) -> Self {
        let dir = temp_dir("interop").unwrap();
        let admin = control_plane.admin_token().unwrap();
        let kubeconfig = dir.join("control-plane.kubeconfig");
        let yaml = Kubeconfig::token(control_plane, &admin).to_yaml().unwrap();
        std::fs::write(&kubeconfig, yaml).unwrap();
        let providers = plane.provider_file();
        let mut other: Value = serde_json::from_slice(&std::fs::read(&providers).unwrap()).unwrap();
        other["providers"][0]["name"] = json!("secretreader");
        let other_providers = dir.join("other-providers.json");
        std::fs::write(&other_providers, other.to_string()).unwrap();
        Self {
            kubeconfig,
            providers,
            other_providers,
            namespace: plane.namespace.clone(),
        }
    }

    /// The Go program for profile `name`, picking its provider from `providers`.
    fn command(&self, providers: &Path, name: &str, extra: &[&str]) -> Command {
        let profile = ProfileRef {
            kubeconfig: &self.kubeconfig,
            namespace: &self.namespace,
            name,
            provider_file: providers,
        };
        interop_client::command(&profile, extra).unwrap()
    }

    /// Runs it with `--once` to completion.
    async fn once(&self, providers: &Path, name: &str) -> (ExitStatus, Vec<Value>, String) {
        interop_client::run(self.command(providers, name, &["--once"]))
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn a_client_go_consumer_reaches_a_member_through_an_ocm_cluster_profile() -> anyhow::Result<()>
{
    let env = Environment::with_members(1).await?;
    let (control_plane, member) = (env.control_plane(), env.cluster(1));

    // The member: a Deployment, and a reader token for it.
    let apps = member.create_namespace("apps").await?;
    let deployments = Api::<Deployment>::namespaced(member.admin_client()?, &apps);
    deployments
        .create(&PostParams::default(), &deployment(&apps, "web", 1))
        .await?;
    let (_, token) = member.create_agent("readers", "reader", HOUR).await?;

    // The control plane: the CRD, and the member published twice the way OCM does, once with
    // its token and once with a token the member rejects.
    let plane = ProfilePlane::create(control_plane).await?;
    for (name, token) in [(member.name(), token.as_str()), ("revoked", "not-a-token")] {
        plane.write_token(name, token).await?;
        plane.publish(name, member, None).await?;
    }
    let consumer = Consumer::new(&plane, control_plane);
    let secrets = [token.clone(), control_plane.admin_token()?];
    let assert_no_secret = |text: &str| {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a token was printed: {text}"
            );
        }
    };
    let (web, api) = (format!("{apps}/web"), format!("{apps}/api"));

    // --once: one list, through the plugin, and exit 0.
    let (status, lines, stderr) = consumer.once(&consumer.providers, member.name()).await;
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(is_list_with(&lines[0], &web), "{lines:?}");
    assert_eq!(plane.plugin_runs(), 1, "the plugin ran once: {stderr}");
    assert_no_secret(&format!("{lines:?}{stderr}"));

    // A token the member rejects: the list fails with the apiserver's 401, exit 1.
    let (status, lines, stderr) = consumer.once(&consumer.providers, "revoked").await;
    println!("a rejected token: {lines:?}, stderr {stderr:?}");
    assert_eq!(status.code(), Some(1), "{lines:?} {stderr}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        (&lines[0]["kind"], &lines[0]["ok"], &lines[0]["code"]),
        (&json!("list"), &json!(false), &json!(401)),
        "{lines:?}"
    );

    // A provider file that names no provider the profile offers: exit 2, nothing on stdout.
    let (status, lines, stderr) = consumer
        .once(&consumer.other_providers, member.name())
        .await;
    assert_eq!(status.code(), Some(2), "{lines:?} {stderr}");
    assert!(
        lines.is_empty() && stderr.contains(OCM),
        "{lines:?} {stderr}"
    );

    // Without --once: list, informer, and a Deployment created meanwhile is seen ADDED.
    let runs_before = plane.plugin_runs();
    let listing = ["--list-interval", "500ms"];
    let mut out =
        interop_client::spawn(consumer.command(&consumer.providers, member.name(), &listing))?;
    interop_client::until(&mut out, "the first list", |l| is_list_with(l, &web)).await?;
    interop_client::until(&mut out, "ADDED web", |l| is_added(l, &web)).await?;
    interop_client::until(&mut out, "synced", |l| l["kind"] == "synced").await?;
    let created = Instant::now();
    deployments
        .create(&PostParams::default(), &deployment(&apps, "api", 1))
        .await?;
    interop_client::until(&mut out, "ADDED api", |l| is_added(l, &api)).await?;
    let seen_after = created.elapsed();
    interop_client::until(&mut out, "a list with api", |l| is_list_with(l, &api)).await?;
    println!(
        "ADDED {api} {seen_after:?} after its creation; lines: {:?}",
        out.seen()
    );

    let (status, seen, stderr) = out.stop().await?;
    assert!(status.success(), "exit after SIGTERM: {status}; {stderr}");
    assert!(
        !seen.iter().any(|l| l.contains("watch-error")),
        "no watch error: {seen:?}"
    );
    // No expirationTimestamp: client-go keeps the credential until a 401, so one run serves
    // the lists, the informer's list and its watch.
    assert_eq!(plane.plugin_runs() - runs_before, 1, "{stderr}");
    assert_no_secret(&format!("{seen:?}{stderr}"));
    Ok(())
}
