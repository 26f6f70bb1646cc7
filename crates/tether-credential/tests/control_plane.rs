//! The built `tether-credential` against a real kube-apiserver (testkit, on loopback): a
//! caller whose RBAC covers the member's Secret gets an `ExecCredential` with the token and a
//! future expiry; a caller without it gets exit 1 and the RBAC it lacks, and never the token.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    str::FromStr as _,
    time::{Duration, Instant},
};

use base64::Engine as _;
use k8s_openapi::{
    api::{
        core::v1::Secret,
        rbac::v1::{Role, RoleBinding},
    },
    jiff::Timestamp,
};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use testkit::{Cluster, Environment};

const BIN: &str = env!("CARGO_BIN_EXE_tether-credential");
const READER: &str = "profile-reader";
const STRANGER: &str = "stranger";
const OPAQUE_SECRET: &str = "member1-credential";
const JWT_SECRET: &str = "member2-credential";
const OPAQUE_TOKEN: &str = "opaque-member-token-s3cr3t";
/// The member's server, as its Secret records it and its profile states it; never dialled.
const MEMBER_SERVER: &str = "https://127.0.0.2:6443";
/// How many timed runs the wall-time figure is taken over.
const TIMED_RUNS: usize = 10;

fn unix_now() -> u64 {
    u64::try_from(Timestamp::now().as_second()).unwrap()
}

/// An unsigned JWT whose `exp` is `exp`: only the member's apiserver judges the signature.
fn jwt(exp: u64) -> String {
    let part = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.c2lnbmF0dXJl",
        part(json!({"alg": "RS256"})),
        part(json!({"sub": "system:serviceaccount:fleet:agent", "exp": exp}))
    )
}

async fn create<K>(api: &Api<K>, value: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// A kubeconfig for `cluster` that authenticates with `token`, written to `dir/<name>`.
fn kubeconfig(cluster: &Cluster, token: &str, dir: &Path, name: &str) -> PathBuf {
    let ca = base64::engine::general_purpose::STANDARD.encode(cluster.ca_pem());
    let yaml = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{{name: k, cluster: {{server: \"{}\", certificate-authority-data: \"{ca}\"}}}}]\n\
         users: [{{name: u, user: {{token: \"{token}\"}}}}]\n\
         contexts: [{{name: c, context: {{cluster: k, user: u}}}}]\n",
        cluster.endpoint()
    );
    let path = dir.join(name);
    std::fs::write(&path, yaml).unwrap();
    path
}

/// `KUBERNETES_EXEC_INFO` as client-go writes it for a Tether profile's `tether` provider.
///
/// `server` is the member's, which the plugin never dials: it reads from the control plane.
fn exec_info(api_version: &str, ns: &str, secret: &str) -> String {
    json!({
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "spec": {"interactive": false, "cluster": {
            "server": MEMBER_SERVER,
            "config": {"member": "member1", "secretRef": {"namespace": ns, "name": secret}},
        }},
    })
    .to_string()
}

/// Runs the binary as client-go would, with nothing from this process's environment that
/// could send it elsewhere than the loopback control plane (proxies, another kubeconfig).
fn run(kubeconfig: &Path, exec_info: &str) -> (Output, Duration) {
    let started = Instant::now();
    let output = Command::new(BIN)
        .args(["--kubeconfig".as_ref(), kubeconfig.as_os_str()])
        .args(["--ttl=5m", "--timeout=10s"])
        .env_clear()
        .env("KUBERNETES_EXEC_INFO", exec_info)
        .env("HOME", kubeconfig.parent().unwrap())
        .output()
        .unwrap();
    (output, started.elapsed())
}

fn stdout_json(output: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}: {stderr}",
        output.status
    );
    assert!(stderr.is_empty(), "{stderr}");
    serde_json::from_slice(&output.stdout).unwrap()
}

fn expiration(doc: &Value) -> u64 {
    let text = doc["status"]["expirationTimestamp"].as_str().unwrap();
    assert!(text.ends_with('Z'), "UTC: {text}");
    u64::try_from(Timestamp::from_str(text).unwrap().as_second()).unwrap()
}

#[tokio::test]
async fn the_caller_gets_the_credential_its_rbac_allows_and_nothing_else() {
    let env = Environment::with_members(0).await.unwrap();
    let plane = env.control_plane();
    assert!(
        plane.endpoint().starts_with("https://127.0.0.1:"),
        "only loopback is dialled: {}",
        plane.endpoint()
    );
    let admin = plane.admin_client().unwrap();
    let ns = plane.create_namespace("fleet").await.unwrap();

    // Karmada's format: `token`, and a CA bundle the consumer does not need here; marked as
    // member1's credential for its server, as the collector marks a published member's Secret.
    let jwt_exp = unix_now() + 120;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    for (name, token) in [
        (OPAQUE_SECRET, OPAQUE_TOKEN.to_owned()),
        (JWT_SECRET, jwt(jwt_exp)),
    ] {
        create(
            &secrets,
            json!({"metadata": {"name": name, "labels": {"tether.io/member": "member1"},
                                "annotations": {"tether.io/server": MEMBER_SERVER}},
                   "stringData": {"token": token, "caBundle": plane.ca_pem()}}),
        )
        .await;
    }

    // The reader may `get` exactly these Secrets; the stranger has testkit's reader role only.
    let dir = tempfile::tempdir().unwrap();
    let mut kubeconfigs = Vec::new();
    for sa in [READER, STRANGER] {
        plane.create_service_account(&ns, sa).await.unwrap();
        let token = plane.mint_token(&ns, sa, Duration::from_secs(3600));
        kubeconfigs.push(kubeconfig(plane, &token.await.unwrap(), dir.path(), sa));
    }
    let [reader, stranger] = <[PathBuf; 2]>::try_from(kubeconfigs).unwrap();
    create(
        &Api::<Role>::namespaced(admin.clone(), &ns),
        json!({"metadata": {"name": "tether-credential"}, "rules": [{"apiGroups": [""],
               "resources": ["secrets"], "resourceNames": [OPAQUE_SECRET, JWT_SECRET],
               "verbs": ["get"]}]}),
    )
    .await;
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), &ns),
        json!({"metadata": {"name": "tether-credential"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tether-credential"},
               "subjects": [{"kind": "ServiceAccount", "name": READER, "namespace": ns}]}),
    )
    .await;

    // An opaque token: handed out for --ttl, in the version asked for.
    let v1 = exec_info("client.authentication.k8s.io/v1", &ns, OPAQUE_SECRET);
    let before = unix_now();
    let doc = stdout_json(&run(&reader, &v1).0);
    assert_eq!(doc["apiVersion"], "client.authentication.k8s.io/v1");
    assert_eq!(doc["kind"], "ExecCredential");
    assert_eq!(doc["status"]["token"], OPAQUE_TOKEN);
    let expires = expiration(&doc);
    assert!(
        (before + 299..=unix_now() + 300).contains(&expires),
        "now + 5m, not {expires} (now {before})"
    );

    // A JWT expiring in 2 minutes: handed out until its exp minus the 30 s skew.
    let v1beta1 = exec_info("client.authentication.k8s.io/v1beta1", &ns, JWT_SECRET);
    let doc = stdout_json(&run(&reader, &v1beta1).0);
    assert_eq!(doc["apiVersion"], "client.authentication.k8s.io/v1beta1");
    assert_eq!(doc["status"]["token"], jwt(jwt_exp));
    assert_eq!(expiration(&doc), jwt_exp - 30);

    // The stranger: exit 1, the RBAC it needs on stderr, and no token anywhere.
    let (output, _) = run(&stranger, &v1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing on stdout");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    let rbac = format!("`get` on `secrets` named {OPAQUE_SECRET} in namespace {ns}");
    assert!(stderr.contains(&rbac), "{stderr}");
    assert!(
        stderr.contains(&format!("system:serviceaccount:{ns}:{STRANGER}")),
        "names the caller: {stderr}"
    );
    assert!(!stderr.contains(OPAQUE_TOKEN), "{stderr}");
    println!("refused: {stderr}");

    // The wall time of one run, start to exit: process start, kubeconfig, TLS, one GET.
    let mut times: Vec<Duration> = (0..TIMED_RUNS)
        .map(|_| {
            let (output, took) = run(&reader, &v1);
            assert!(output.status.success());
            took
        })
        .collect();
    times.sort_unstable();
    println!(
        "tether-credential wall time over {TIMED_RUNS} runs: min {:?}, median {:?}, max {:?}",
        times[0],
        times[TIMED_RUNS / 2],
        times[TIMED_RUNS - 1]
    );
}
