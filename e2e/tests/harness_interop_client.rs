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
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use e2e::kubeconfig_plane::{Kubeconfig, plugin_path};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tempfile::TempDir;
use testkit::{Cluster, Environment, deployment};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::Instant;

const CRD_YAML: &str = include_str!("../../deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml");
/// The name OCM publishes under, as cluster manager and as access provider.
const OCM: &str = "open-cluster-management";
/// The inventory namespace on the control plane: profiles and the per-cluster Secrets.
const INVENTORY: &str = "fleet";
/// A generous bound on each thing awaited: a process start, a plugin run, a watch event.
const DEADLINE: Duration = Duration::from_secs(30);
const HOUR: Duration = Duration::from_secs(3600);

fn profiles(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("multicluster.x-k8s.io", "v1alpha1", "ClusterProfile");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "clusterprofiles");
    Api::namespaced_with(client.clone(), INVENTORY, &resource)
}

/// Creates the shipped CRD and waits until the control plane serves it.
async fn install_crd(control_plane: &Cluster) {
    let client = control_plane.admin_client().unwrap();
    let crd: CustomResourceDefinition = serde_yaml::from_str(CRD_YAML).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let started = Instant::now();
    while profiles(&client)
        .list_metadata(&ListParams::default().limit(1))
        .await
        .is_err()
    {
        assert!(started.elapsed() < DEADLINE, "the CRD is not served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    binary: PathBuf,
    dir: TempDir,
}

impl Consumer {
    fn new(binary: PathBuf, control_plane: &Cluster) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("tether-interop-")
            .tempdir()
            .unwrap();
        let admin = control_plane.admin_token().unwrap();
        let kubeconfig = Kubeconfig::token(control_plane, &admin).to_yaml().unwrap();
        std::fs::write(dir.path().join("control-plane.kubeconfig"), kubeconfig).unwrap();
        std::fs::write(dir.path().join("ca.crt"), control_plane.ca_pem()).unwrap();
        std::fs::write(dir.path().join("admin-token"), admin).unwrap();
        let consumer = Self { binary, dir };
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

    /// The Go program for profile `name`, with exactly `PATH` (for the plugin's `python3`) in
    /// its environment: no proxy variable reaches it, and every address it dials is the
    /// loopback one of a harness apiserver.
    fn command(&self, providers: &str, name: &str, extra: &[&str]) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .arg("--kubeconfig")
            .arg(self.path("control-plane.kubeconfig"))
            .args(["--profile-namespace", INVENTORY, "--profile-name", name])
            .arg("--provider-file")
            .arg(self.path(providers))
            .args(extra)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Runs it with `--once` to completion.
    async fn once(&self, providers: &str, name: &str) -> (ExitStatus, Vec<Value>, String) {
        run(self.command(providers, name, &["--once"])).await
    }

    /// How many times the plugin ran.
    fn plugin_runs(&self) -> usize {
        std::fs::read_to_string(self.path("count"))
            .unwrap_or_default()
            .lines()
            .count()
    }
}

/// Runs it to completion: exit status, stdout lines as JSON, stderr.
async fn run(mut cmd: Command) -> (ExitStatus, Vec<Value>, String) {
    let out = tokio::time::timeout(DEADLINE, cmd.output())
        .await
        .expect("the interop client ran too long")
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    (out.status, lines, stderr)
}

/// The running program's stdout, line by line, with everything seen so far for the failure
/// messages.
struct Output {
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
}

impl Output {
    /// Waits, until [`DEADLINE`], for a line that `want` accepts.
    async fn until(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no {what} within {DEADLINE:?}; saw {:?}", self.seen))
                .unwrap()
                .unwrap_or_else(|| panic!("stdout closed before {what}; saw {:?}", self.seen));
            let value: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            self.seen.push(line);
            if want(&value) {
                return value;
            }
        }
    }
}

fn is_list_with(line: &Value, object: &str) -> bool {
    let items = line["items"].as_array();
    line["kind"] == "list"
        && line["ok"] == true
        && items.is_some_and(|i| i.contains(&json!(object)))
}

fn is_added(line: &Value, object: &str) -> bool {
    line["kind"] == "watch" && line["type"] == "ADDED" && line["object"] == object
}

/// SIGTERM, then the exit status (the contract: 0), killing it if it does not stop.
async fn terminate(mut child: Child) -> ExitStatus {
    let pid = child.id().unwrap().to_string();
    let sent = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(sent.success(), "kill -TERM {pid}");
    match tokio::time::timeout(DEADLINE, child.wait()).await {
        Ok(status) => status.unwrap(),
        Err(_) => {
            child.kill().await.unwrap();
            panic!("the interop client ignored SIGTERM for {DEADLINE:?}");
        }
    }
}

#[tokio::test]
async fn a_client_go_consumer_reaches_a_member_through_an_ocm_cluster_profile() {
    let binary = testkit::interop::binary("clusterprofile-client").unwrap();
    let env = Environment::with_members(1).await.unwrap();
    let (control_plane, member) = (env.control_plane(), env.cluster(1));

    // The member: a Deployment, and a reader token for it.
    let apps = member.create_namespace("apps").await.unwrap();
    let deployments = Api::<Deployment>::namespaced(member.admin_client().unwrap(), &apps);
    deployments
        .create(&PostParams::default(), &deployment(&apps, "web", 1))
        .await
        .unwrap();
    let readers = member.create_namespace("readers").await.unwrap();
    member
        .create_service_account(&readers, "reader")
        .await
        .unwrap();
    let token = member.mint_token(&readers, "reader", HOUR).await.unwrap();

    // The control plane: the CRD, and the member published twice, once with its token and
    // once with a token the member rejects.
    install_crd(control_plane).await;
    control_plane
        .create_namespace_named(INVENTORY)
        .await
        .unwrap();
    publish(control_plane, member, member.name(), &token).await;
    publish(control_plane, member, "revoked", "not-a-token").await;
    let consumer = Consumer::new(binary, control_plane);
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
    let mut child = consumer
        .command(
            "providers.json",
            member.name(),
            &["--list-interval", "500ms"],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stderr.take().unwrap();
    let stderr_task = tokio::spawn(async move {
        let mut buf = String::new();
        let _ = pipe.read_to_string(&mut buf).await;
        buf
    });
    let mut out = Output {
        lines: BufReader::new(child.stdout.take().unwrap()).lines(),
        seen: Vec::new(),
    };
    out.until("the first list", |l| is_list_with(l, &web)).await;
    out.until("ADDED web", |l| is_added(l, &web)).await;
    out.until("synced", |l| l["kind"] == "synced").await;
    let created = Instant::now();
    deployments
        .create(&PostParams::default(), &deployment(&apps, "api", 1))
        .await
        .unwrap();
    out.until("ADDED api", |l| is_added(l, &api)).await;
    let seen_after = created.elapsed();
    out.until("a list with api", |l| is_list_with(l, &api))
        .await;
    println!(
        "ADDED {api} {seen_after:?} after its creation; lines: {:?}",
        out.seen
    );

    let status = terminate(child).await;
    while let Some(line) = out.lines.next_line().await.unwrap() {
        out.seen.push(line);
    }
    let stderr = stderr_task.await.unwrap();
    assert!(status.success(), "exit after SIGTERM: {status}; {stderr}");
    assert!(
        !out.seen.iter().any(|l| l.contains("watch-error")),
        "no watch error: {:?}",
        out.seen
    );
    // No expirationTimestamp: client-go keeps the credential until a 401, so one run serves
    // the lists, the informer's list and its watch.
    assert_eq!(consumer.plugin_runs() - runs_before, 1, "{stderr}");
    assert_no_secret(&format!("{:?}{stderr}", out.seen));
}
