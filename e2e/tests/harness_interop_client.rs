//! A real client-go consumer of SIG-Multicluster ClusterProfiles
//! (`e2e/interop/clusterprofile-client`, built by `hack/interop.sh`) against real
//! kube-apiservers: it reads a ClusterProfile published the way Open Cluster Management does,
//! picks the provider its provider file names, and reaches the member through client-go's exec
//! credential machinery (KEP-541), which runs `e2e/plugins/secretreader-plugin.py` with the
//! profile's `client.authentication.k8s.io/exec` extension as `spec.cluster.config`. The
//! profile is written in the producer's format, not through Tether's types, against the CRD
//! Tether ships (`deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml`): both must serve
//! a consumer other than Tether.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::path::PathBuf;
use std::process::ExitStatus;

use e2e::interop_client::{self, ProfileRef, Running, is_added, is_list_with};
use e2e::kubeconfig_plane::{Kubeconfig, plugin_path};
use e2e::limits::HOUR;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tempfile::TempDir;
use testkit::{Cluster, Environment, crd, deployment};
use tokio::process::Command;
use tokio::time::Instant;

/// The name OCM publishes under, as cluster manager and as access provider.
const OCM: &str = "open-cluster-management";
/// The inventory namespace on the control plane: profiles and the per-cluster Secrets.
const INVENTORY: &str = "fleet";

fn profiles(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), INVENTORY, &crd::cluster_profile_resource())
}

/// Publishes `name` the way OCM does: Secret `fleet/<name>` with the `token` the plugin hands
/// out, and a ClusterProfile whose one access provider points at `member` and carries the
/// cluster name in the exec extension (status written through the status subresource).
async fn publish(control_plane: &Cluster, member: &Cluster, name: &str, token: &str) {
    let client = control_plane.admin_client().unwrap();
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(INVENTORY.to_owned()),
            ..Default::default()
        },
        data: Some([("token".to_owned(), ByteString(token.into()))].into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), INVENTORY)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let profile: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {
            "name": name,
            "namespace": INVENTORY,
            "labels": { "x-k8s.io/cluster-manager": OCM },
        },
        "spec": { "displayName": name, "clusterManager": { "name": OCM } },
    }))
    .unwrap();
    let api = profiles(&client);
    api.create(&PostParams::default(), &profile).await.unwrap();
    let ca = serde_json::to_value(ByteString(member.ca_pem().into())).unwrap();
    let status = json!({ "status": { "accessProviders": [{
        "name": OCM,
        "cluster": {
            "server": member.endpoint(),
            "certificate-authority-data": ca,
            "extensions": [{
                "name": "client.authentication.k8s.io/exec",
                "extension": { "clusterName": name },
            }],
        },
    }]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// The Go program and what it needs: the control plane's kubeconfig (admin), provider files
/// naming the secretreader plugin, and the files the plugin reads (removed when dropped).
struct Consumer {
    dir: TempDir,
}

impl Consumer {
    fn new(control_plane: &Cluster) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("tether-interop-")
            .tempdir()
            .unwrap();
        let admin = control_plane.admin_token().unwrap();
        let kubeconfig = Kubeconfig::token(control_plane, &admin).to_yaml().unwrap();
        std::fs::write(dir.path().join("control-plane.kubeconfig"), kubeconfig).unwrap();
        std::fs::write(dir.path().join("ca.crt"), control_plane.ca_pem()).unwrap();
        std::fs::write(dir.path().join("admin-token"), admin).unwrap();
        let consumer = Self { dir };
        let env: Vec<Value> = [
            ("PLUGIN_SERVER", control_plane.endpoint().to_owned()),
            ("PLUGIN_CA_FILE", consumer.path("ca.crt")),
            ("PLUGIN_ADMIN_TOKEN_FILE", consumer.path("admin-token")),
            ("PLUGIN_SECRET_NAMESPACE", INVENTORY.to_owned()),
            ("PLUGIN_COUNT_FILE", consumer.path("count")),
        ]
        .iter()
        .map(|(name, value)| json!({ "name": name, "value": value }))
        .collect();
        let plugin = plugin_path("secretreader-plugin.py").unwrap();
        let exec = json!({
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": plugin.display().to_string(),
            "env": env,
            "provideClusterInfo": true,
        });
        let provider = |name: &str| {
            json!({ "providers": [{
                "name": name,
                "execConfig": exec,
                "profileSourcedCLIArgsPolicy": "Ignore",
                "profileSourcedEnvVarsPolicy": "Ignore",
            }]})
        };
        for (file, name) in [
            ("providers.json", OCM),
            ("other-providers.json", "secretreader"),
        ] {
            std::fs::write(consumer.path(file), provider(name).to_string()).unwrap();
        }
        consumer
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// The Go program for profile `name`, picking its provider from `providers`.
    fn command(&self, providers: &str, name: &str, extra: &[&str]) -> Command {
        let (kubeconfig, provider_file) =
            (self.file("control-plane.kubeconfig"), self.file(providers));
        let profile = ProfileRef {
            kubeconfig: &kubeconfig,
            namespace: INVENTORY,
            name,
            provider_file: &provider_file,
        };
        interop_client::command(&profile, extra).unwrap()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs it with `--once` to completion.
    async fn once(&self, providers: &str, name: &str) -> (ExitStatus, Vec<Value>, String) {
        interop_client::run(self.command(providers, name, &["--once"]))
            .await
            .unwrap()
    }

    /// How many times the plugin ran.
    fn plugin_runs(&self) -> usize {
        std::fs::read_to_string(self.path("count"))
            .unwrap_or_default()
            .lines()
            .count()
    }
}

#[tokio::test]
async fn a_client_go_consumer_reaches_a_member_through_an_ocm_cluster_profile() {
    let env = Environment::with_members(1).await.unwrap();
    let (control_plane, member) = (env.control_plane(), env.cluster(1));

    // The member: a Deployment, and a reader token for it.
    let apps = member.create_namespace("apps").await.unwrap();
    let deployments = Api::<Deployment>::namespaced(member.admin_client().unwrap(), &apps);
    deployments
        .create(&PostParams::default(), &deployment(&apps, "web", 1))
        .await
        .unwrap();
    let (_, token) = member
        .create_agent("readers", "reader", HOUR)
        .await
        .unwrap();

    // The control plane: the CRD, and the member published twice, once with its token and
    // once with a token the member rejects.
    crd::install_cluster_profile_crd(&control_plane.admin_client().unwrap())
        .await
        .unwrap();
    control_plane
        .create_namespace_named(INVENTORY)
        .await
        .unwrap();
    publish(control_plane, member, member.name(), &token).await;
    publish(control_plane, member, "revoked", "not-a-token").await;
    let consumer = Consumer::new(control_plane);
    let secrets = [token.clone(), control_plane.admin_token().unwrap()];
    let assert_no_secret = |text: &str| {
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a token was printed: {text}"
            );
        }
    };
    let web = format!("{apps}/web");
    let api = format!("{apps}/api");

    // --once: one list, through the plugin, and exit 0.
    let (status, lines, stderr) = consumer.once("providers.json", member.name()).await;
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(is_list_with(&lines[0], &web), "{lines:?}");
    assert_eq!(consumer.plugin_runs(), 1, "the plugin ran once: {stderr}");
    assert_no_secret(&format!("{lines:?}{stderr}"));

    // A token the member rejects: the list fails with the apiserver's 401, exit 1.
    let (status, lines, stderr) = consumer.once("providers.json", "revoked").await;
    println!("a rejected token: {lines:?}, stderr {stderr:?}");
    assert_eq!(status.code(), Some(1), "{lines:?} {stderr}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        (&lines[0]["kind"], &lines[0]["ok"], &lines[0]["code"]),
        (&json!("list"), &json!(false), &json!(401)),
        "{lines:?}"
    );

    // A provider file that names no provider the profile offers: exit 2, nothing on stdout.
    let (status, lines, stderr) = consumer.once("other-providers.json", member.name()).await;
    assert_eq!(status.code(), Some(2), "{lines:?} {stderr}");
    assert!(
        lines.is_empty() && stderr.contains(OCM),
        "{lines:?} {stderr}"
    );

    // Without --once: list, informer, and a Deployment created meanwhile is seen ADDED.
    let runs_before = consumer.plugin_runs();
    let mut out = Running::spawn(consumer.command(
        "providers.json",
        member.name(),
        &["--list-interval", "500ms"],
    ))
    .unwrap();
    out.until("the first list", |l| is_list_with(l, &web))
        .await
        .unwrap();
    out.until("ADDED web", |l| is_added(l, &web)).await.unwrap();
    out.until("synced", |l| l["kind"] == "synced")
        .await
        .unwrap();
    let created = Instant::now();
    deployments
        .create(&PostParams::default(), &deployment(&apps, "api", 1))
        .await
        .unwrap();
    out.until("ADDED api", |l| is_added(l, &api)).await.unwrap();
    let seen_after = created.elapsed();
    out.until("a list with api", |l| is_list_with(l, &api))
        .await
        .unwrap();
    println!(
        "ADDED {api} {seen_after:?} after its creation; lines: {:?}",
        out.seen
    );

    let (status, seen, stderr) = out.terminate().await.unwrap();
    assert!(status.success(), "exit after SIGTERM: {status}; {stderr}");
    assert!(
        !seen.iter().any(|l| l.contains("watch-error")),
        "no watch error: {seen:?}"
    );
    // No expirationTimestamp: client-go keeps the credential until a 401, so one run serves
    // the lists, the informer's list and its watch.
    assert_eq!(consumer.plugin_runs() - runs_before, 1, "{stderr}");
    assert_no_secret(&format!("{seen:?}{stderr}"));
}
