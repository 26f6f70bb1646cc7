//! Client identities the harness hands out, proven on real kube-apiservers: X.509 client
//! certificates from a cluster's client CA ([`Cluster::issue_client_cert`]) and the two exec
//! credential plugins in `e2e/plugins/`.
//!
//! Every identity is checked the way the apiserver sees it, through a `SelfSubjectReview`.

use std::process::Output;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use e2e::kubeconfig_plane::{PluginFiles, plugin_path};
use e2e::limits::HOUR;
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, UserInfo};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::config::AuthInfo;
use kube::{Client, Config};
use serde_json::{Value, json};
use testkit::{ClientCert, Cluster, Environment, RestartOptions, status_code};

const EXEC_API_VERSION: &str = "client.authentication.k8s.io/v1";
/// A generous bound on one plugin run (its own HTTP timeout is 10 s).
const PLUGIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Who `client` is, according to the apiserver.
async fn whoami(client: Client) -> Result<UserInfo, kube::Error> {
    let review = Api::<SelfSubjectReview>::all(client)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    Ok(review.status.unwrap().user_info.unwrap())
}

/// Who `token` authenticates as on `cluster`.
async fn username(cluster: &Cluster, token: &str) -> String {
    let client = cluster.client_with_token(token).unwrap();
    whoami(client).await.unwrap().username.unwrap()
}

/// A kube config that trusts `cluster`'s serving CA and authenticates with `cert` alone: the
/// admin's token is dropped with the rest of its `AuthInfo`.
fn cert_config(cluster: &Cluster, cert: &ClientCert) -> Config {
    let mut config = cluster.admin_config();
    config.auth_info = AuthInfo {
        client_certificate_data: Some(STANDARD.encode(&cert.cert_pem)),
        client_key_data: Some(STANDARD.encode(&cert.key_pem).into()),
        ..AuthInfo::default()
    };
    config
}

async fn whoami_with_cert(cluster: &Cluster, cert: &ClientCert) -> Result<UserInfo, kube::Error> {
    whoami(Client::try_from(cert_config(cluster, cert)).unwrap()).await
}

/// The HTTP status `cluster` answers a SelfSubjectReview with when `cert` is presented.
async fn cert_rejection(cluster: &Cluster, cert: &ClientCert) -> Option<u16> {
    let err = whoami_with_cert(cluster, cert)
        .await
        .expect_err("the certificate must not authenticate");
    status_code(&err)
}

/// Who `cert` authenticates as on `cluster`: `user: group, group`.
async fn identity(cluster: &Cluster, cert: &ClientCert) -> String {
    let who = whoami_with_cert(cluster, cert).await.unwrap();
    let groups = who.groups.unwrap_or_default().join(", ");
    format!("{}: {groups}", who.username.unwrap())
}

#[tokio::test]
async fn client_certificates_authenticate_as_their_subject_and_survive_a_ca_rotation()
-> anyhow::Result<()> {
    let mut env = Environment::with_members(1).await?;
    let (control_plane, member) = (env.control_plane().clone(), env.cluster(1).clone());
    assert_ne!(
        member.client_ca_pem().unwrap(),
        member.ca_pem(),
        "the client CA is not the serving CA"
    );

    let alice = member.issue_client_cert("alice", &["tether-test"], HOUR)?;
    assert_eq!(
        format!("{alice:?}"),
        "ClientCert { .. }",
        "Debug hides the key"
    );
    let alice_tester = "alice: tether-test, system:authenticated";
    assert_eq!(identity(&member, &alice).await, alice_tester);

    // Several O= are several groups.
    let bob = member.issue_client_cert("bob", &["tether-test", "tether-ops"], HOUR)?;
    let bob_groups = "bob: tether-test, tether-ops, system:authenticated";
    assert_eq!(identity(&member, &bob).await, bob_groups);

    // Right CA, wrong time: the TLS handshake passes (the apiserver only requests a client
    // certificate) and authentication fails with 401, not as anonymous.
    let expired = member.issue_expired_client_cert("alice", &["tether-test"])?;
    assert_eq!(cert_rejection(&member, &expired).await, Some(401));

    // A well-formed, valid certificate from another cluster's client CA.
    let foreign = control_plane.issue_client_cert("alice", &["tether-test"], HOUR)?;
    let at_home = identity(&control_plane, &foreign).await;
    assert_eq!(at_home, alice_tester, "it is good where it was issued");
    assert_eq!(cert_rejection(&member, &foreign).await, Some(401));

    // A new serving CA, the same client CA: alice's certificate still works.
    let client_ca = member.client_ca_pem().unwrap();
    env.restart(1, RestartOptions::new_ca()).await?;
    let rotated = env.cluster(1);
    assert_ne!(rotated.ca_pem(), member.ca_pem(), "a new serving CA");
    assert_eq!(rotated.client_ca_pem().unwrap(), client_ca);
    assert_eq!(identity(rotated, &alice).await, alice_tester);
    assert_eq!(cert_rejection(rotated, &expired).await, Some(401));
    Ok(())
}

/// Runs `e2e/plugins/<plugin>` with exactly `vars` (and `PATH`, for `python3`): no proxy
/// variables or anything else of the test's environment reach it.
async fn run_plugin(plugin: &str, vars: &[(&str, String)]) -> Output {
    let path = plugin_path(plugin).unwrap();
    let mut cmd = tokio::process::Command::new(&path);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .kill_on_drop(true);
    tokio::time::timeout(PLUGIN_TIMEOUT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{plugin} ran longer than {PLUGIN_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("running {}: {e}", path.display()))
}

/// The ExecCredential a successful run printed (exit 0, nothing on stderr).
fn credential(plugin: &str, out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{plugin} failed: {stderr}");
    assert!(stderr.is_empty(), "{plugin} wrote to stderr: {stderr}");
    let credential: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(credential["apiVersion"], EXEC_API_VERSION);
    assert_eq!(credential["kind"], "ExecCredential");
    credential
}

/// A failed run: exit 1, nothing on stdout, one line on stderr, which it returns.
fn failure(plugin: &str, out: &Output, secrets: &[&str]) -> String {
    assert_eq!(out.status.code(), Some(1), "{plugin} should fail: {out:?}");
    assert!(out.stdout.is_empty(), "{plugin} printed on failure");
    let stderr = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    for secret in secrets {
        assert!(
            !stderr.contains(secret),
            "{plugin} leaked a token: {stderr}"
        );
    }
    stderr
}

fn exec_info(cluster: Value) -> String {
    json!({
        "apiVersion": EXEC_API_VERSION,
        "kind": "ExecCredential",
        "spec": { "interactive": false, "cluster": cluster },
    })
    .to_string()
}

#[tokio::test]
async fn tokenrequest_plugin_mints_a_fresh_short_lived_token_per_exec() -> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let member = env.cluster(1);
    let ns = member.create_namespace("plugin").await?;
    member.create_service_account(&ns, "agent").await?;
    let files = PluginFiles::for_cluster(member, "tokenrequest")?;
    let info = exec_info(json!({ "server": member.endpoint() }));
    let vars_for = |account: &str| {
        files.env(&[
            ("PLUGIN_SERVICE_ACCOUNT", format!("{ns}/{account}")),
            ("KUBERNETES_EXEC_INFO", info.clone()),
        ])
    };
    let vars = vars_for("agent");

    let plugin = "tokenrequest-plugin.py";
    let mut tokens = Vec::new();
    for run in 1..=2 {
        let started = Timestamp::now();
        let out = run_plugin(plugin, &vars).await;
        let credential = credential(plugin, &out);
        let status = &credential["status"];
        let token = status["token"].as_str().unwrap().to_owned();
        let expiry: Time = serde_json::from_value(status["expirationTimestamp"].clone())?;
        let ahead = expiry.0.as_second() - started.as_second();
        assert!(
            (590..=610).contains(&ahead),
            "run {run}: expires {ahead} s ahead, not ~600"
        );

        let who = format!("system:serviceaccount:{ns}:agent");
        assert_eq!(username(member, &token).await, who);
        assert_eq!(files.runs().len(), run, "one count line per exec");
        tokens.push(token);
    }
    assert_ne!(tokens[0], tokens[1], "every exec mints a new token");

    // A ServiceAccount that does not exist: the apiserver's 404, in one line, no token.
    let admin = member.admin_token()?;
    let out = run_plugin(plugin, &vars_for("nobody")).await;
    let stderr = failure(plugin, &out, &[&admin, &tokens[0], &tokens[1]]);
    assert!(stderr.contains("HTTP 404"), "{stderr}");
    assert_eq!(files.runs().len(), 3, "failed runs are counted too");

    // Another CA than the server's: a TLS failure, not a token.
    let other = env.control_plane();
    std::fs::write(files.path("ca.crt"), other.ca_pem())?;
    let out = run_plugin(plugin, &vars).await;
    let stderr = failure(plugin, &out, &[&admin]);
    assert!(stderr.contains("CERTIFICATE_VERIFY_FAILED"), "{stderr}");
    Ok(())
}

#[tokio::test]
async fn secretreader_plugin_returns_the_cluster_secret_token_without_expiry() -> anyhow::Result<()>
{
    let env = Environment::with_members(1).await?;
    let (control_plane, member) = (env.control_plane(), env.cluster(1));

    // On the member: a ServiceAccount and a TokenRequest token for it.
    let (member_ns, token) = member.create_agent("agent", "agent", HOUR).await?;

    // On the control plane: Secret <ns>/member1 holding it under `token`.
    let creds_ns = control_plane.create_namespace("creds").await?;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": member.name(), "namespace": creds_ns },
        "data": { "token": STANDARD.encode(&token) },
    }))?;
    Api::<Secret>::namespaced(control_plane.admin_client()?, &creds_ns)
        .create(&PostParams::default(), &secret)
        .await?;

    let files = PluginFiles::for_cluster(control_plane, "secretreader")?;
    let vars = files.env(&[("PLUGIN_SECRET_NAMESPACE", creds_ns.clone())]);
    let cluster_info = |name: &str| {
        exec_info(json!({
            "server": member.endpoint(),
            "certificate-authority-data": STANDARD.encode(member.ca_pem()),
            "config": { "clusterName": name },
        }))
    };
    let with_info = |info: String| {
        let mut vars = vars.clone();
        vars.push(("KUBERNETES_EXEC_INFO", info));
        vars
    };

    let plugin = "secretreader-plugin.py";
    let out = run_plugin(plugin, &with_info(cluster_info(member.name()))).await;
    let credential = credential(plugin, &out);
    let status = credential["status"].as_object().unwrap();
    assert_eq!(status["token"], token.as_str());
    assert!(
        !status.contains_key("expirationTimestamp"),
        "no expiry: {:?}",
        status.keys().collect::<Vec<_>>()
    );
    let who = format!("system:serviceaccount:{member_ns}:agent");
    assert_eq!(username(member, &token).await, who);
    assert_eq!(files.runs().len(), 1);

    // No Secret for that cluster name: the control plane's 404.
    let admin = control_plane.admin_token()?;
    let out = run_plugin(plugin, &with_info(cluster_info("member9"))).await;
    let stderr = failure(plugin, &out, &[&admin, &token]);
    assert!(stderr.contains("HTTP 404"), "{stderr}");

    // Without provideClusterInfo there is no cluster name to look up.
    let out = run_plugin(plugin, &with_info(exec_info(Value::Null))).await;
    let stderr = failure(plugin, &out, &[&admin, &token]);
    assert!(stderr.contains("provideClusterInfo"), "{stderr}");
    assert_eq!(files.runs().len(), 3, "failed runs are counted too");
    Ok(())
}
