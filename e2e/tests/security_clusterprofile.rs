//! Attacks by whoever writes a ClusterProfile, against the real `collector` and the real
//! `tether-credential` on real apiservers, with a hostile HTTPS endpoint on 127.0.0.2 that logs
//! every `Authorization` header it is sent.
//!
//! - A profile read with `--members-from clusterprofile` asks the secretreader plugin for
//!   another member's token (`clusterName: member1`) and names the hostile endpoint as its
//!   server. The provider entry pins `clusterName` to the profile's own name and the server to
//!   the fleet's addresses: the profile is refused on that member only, no plugin runs for it,
//!   and the endpoint never sees a token.
//! - `tether-credential`, run as client-go runs it by a caller that may read every Secret, is
//!   asked for a Secret not marked as the member's, a ServiceAccount token Secret, a Secret
//!   marked for another member, and the member's Secret for a server other than the recorded
//!   one: each time it exits 1, says why on stderr, and prints no token.
//! - A real client-go consumer (`e2e/interop/clusterprofile-client`) reads a forged profile that
//!   names the Secret the collector marked for member1 and the hostile endpoint as its server:
//!   `tether-credential` refuses, and the endpoint never sees member1's token.

use std::{
    net::Ipv4Addr,
    path::Path,
    process::{Command, Output},
    time::Duration,
};

use e2e::{
    clusterprofiles::{Consumer, grant_consumer, start_publishing},
    interop_client::{self, ProfileRef},
    kubeconfig_plane::{
        Kubeconfig,
        read_api::{wait_condition, wait_healthy},
    },
    limits::{PROBE, START},
    profile_plane::{ProfilePlane, access_provider},
    scenario::Scenario,
    scenario::{AGENT, one_member_with_agent},
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testkit::{Environment, HostileEndpoint, crd, eventually, karmada::SECRET_NAMESPACE, matching};

const CONVERGE: Duration = Duration::from_secs(20);
const VICTIM: &str = "member1";

#[tokio::test]
async fn a_profile_cannot_send_another_members_token_to_a_server_of_its_choosing()
-> anyhow::Result<()> {
    let (env, _, token) = one_member_with_agent().await?;
    let (control_plane, member) = (env.control_plane(), env.cluster(1));
    let hostile = HostileEndpoint::start(Ipv4Addr::new(127, 0, 0, 2)).await?;

    let plane = ProfilePlane::create(control_plane).await?;
    plane.pin_provider(&json!({
        "profileConfigPins": {"clusterName": "$(PROFILE_NAME)"},
        "serverPatterns": ["^https://127\\.0\\.0\\.1:[0-9]+$"],
    }))?;
    plane.write_token(VICTIM, &token).await?;
    plane.write_token("decoy", "decoy-own-token").await?;
    plane.publish(VICTIM, member, None).await?;
    // The thief asks the plugin for member1's Secret; the decoy asks for its own, but sends
    // it to the hostile endpoint: one pin each.
    for (name, secret) in [("thief", VICTIM), ("decoy", "decoy")] {
        let provider = access_provider(&hostile.url(), hostile.ca_pem(), secret);
        plane.publish(name, member, Some(json!([provider]))).await?;
    }

    // The endpoint policy lets 127.0.0.2 in: only the pins stand in the way.
    let allow = hostile.allow_endpoint_arg();
    let collector = plane
        .source
        .start_collector(PROBE, &["--allow-endpoint", &allow])
        .await?;
    wait_healthy(&collector, VICTIM, START).await?;
    let refused = |name, condition| wait_condition(&collector, name, "Ready", condition, CONVERGE);
    let thief = refused("thief", "False/DefinitionInvalid").await;
    let decoy = refused("decoy", "False/EndpointForbidden").await;
    // A few more probe periods, in which a member made of either profile would have dialled.
    tokio::time::sleep(PROBE * 3).await;
    assert!(
        !hostile.saw_bearer(&token),
        "member1's token reached the hostile endpoint: {} of {} requests carried it",
        hostile
            .authorizations()
            .iter()
            .filter(|a| a.contains(&token))
            .count(),
        hostile.requests()
    );
    assert_eq!(
        hostile.requests(),
        0,
        "nothing is dialled for a refused profile: {:?}",
        hostile.request_lines()
    );
    let (_, thief) = thief?;
    println!("thief: {}: {}", thief.short(), thief.message);
    assert!(
        thief.message.contains("\"clusterName\" to \"thief\"")
            && thief.message.contains("\"member1\""),
        "{thief:?}"
    );
    let (_, decoy) = decoy?;
    println!("decoy: {}: {}", decoy.short(), decoy.message);
    assert!(
        decoy.message.contains("serverPatterns") && decoy.message.contains("127.0.0.2"),
        "{decoy:?}"
    );
    wait_healthy(&collector, VICTIM, CONVERGE).await?;
    Ok(())
}

/// The server recorded on member1's Secret, as the collector records its published profile's.
const RECORDED_SERVER: &str = "https://127.0.0.1:6443";
const FORGED_SERVER: &str = "https://127.0.0.2:6443";
const SECRET_TOKEN: &str = "member-token-never-printed";

/// `KUBERNETES_EXEC_INFO` for a profile whose `tether` provider names `secret` for `member`
/// and whose server is `server`.
fn exec_info(ns: &str, secret: &str, member: &str, server: &str) -> String {
    json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "spec": {"interactive": false, "cluster": {
            "server": server,
            "config": {"member": member, "secretRef": {"namespace": ns, "name": secret}},
        }},
    })
    .to_string()
}

/// Runs the real binary as client-go would, with an environment of its own.
fn run(binary: &Path, kubeconfig: &Path, exec_info: &str) -> Output {
    Command::new(binary)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--timeout=10s")
        .env_clear()
        .env("KUBERNETES_EXEC_INFO", exec_info)
        .env("HOME", kubeconfig.parent().unwrap())
        .output()
        .unwrap()
}

#[tokio::test]
async fn tether_credential_serves_only_the_marked_secret_of_the_member_to_its_recorded_server()
-> anyhow::Result<()> {
    let binary = testkit::locate_binary("tether-credential")?;
    let env = Environment::with_members(0).await?;
    let plane = env.control_plane();
    let admin = plane.admin_client()?;
    let ns = plane.create_namespace("fleet").await?;
    plane.create_service_account(&ns, AGENT).await?;
    let secrets: Api<Secret> = Api::namespaced(admin, &ns);
    let marked = |member: &str| {
        json!({"labels": {"tether.io/member": member},
               "annotations": {"tether.io/server": RECORDED_SERVER}})
    };
    let mut sa_token = marked(VICTIM);
    sa_token["annotations"]["kubernetes.io/service-account.name"] = json!(AGENT);
    for (name, mut metadata, type_) in [
        (VICTIM, marked(VICTIM), "Opaque"),
        ("unmarked", json!({}), "Opaque"),
        ("member2", marked("member2"), "Opaque"),
        ("sa-token", sa_token, "kubernetes.io/service-account-token"),
    ] {
        metadata["name"] = json!(name);
        let secret: Secret = serde_json::from_value(json!({
            "metadata": metadata, "type": type_,
            "stringData": {"token": SECRET_TOKEN},
        }))?;
        secrets.create(&PostParams::default(), &secret).await?;
    }
    // The caller may read every Secret: only the Secret's own marks stand in the way.
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("caller.kubeconfig");
    let yaml = Kubeconfig::token(plane, &plane.admin_token()?).to_yaml()?;
    std::fs::write(&kubeconfig, yaml)?;

    let own = exec_info(&ns, VICTIM, VICTIM, RECORDED_SERVER);
    let served = run(&binary, &kubeconfig, &own);
    assert!(
        served.status.success(),
        "the member's own marked Secret for its recorded server: {}",
        String::from_utf8_lossy(&served.stderr)
    );
    let doc: Value = serde_json::from_slice(&served.stdout)?;
    assert_eq!(doc["status"]["token"], SECRET_TOKEN);

    for (attack, info, says) in [
        (
            "a Secret without the member label",
            exec_info(&ns, "unmarked", VICTIM, RECORDED_SERVER),
            "is not marked as member member1's credential",
        ),
        (
            "a ServiceAccount token Secret",
            exec_info(&ns, "sa-token", VICTIM, RECORDED_SERVER),
            "is a ServiceAccount token Secret",
        ),
        (
            "another member's Secret",
            exec_info(&ns, "member2", VICTIM, RECORDED_SERVER),
            "is marked as the credential of member \"member2\", not of member1",
        ),
        (
            "the member's Secret for a forged server",
            exec_info(&ns, VICTIM, VICTIM, FORGED_SERVER),
            "the client would send it to \"https://127.0.0.2:6443\"",
        ),
    ] {
        let output = run(&binary, &kubeconfig, &info);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        println!("{attack}: exit {:?}: {stderr}", output.status.code());
        assert!(
            !stdout.contains(SECRET_TOKEN) && !stderr.contains(SECRET_TOKEN),
            "{attack}: the token was printed: {stdout}"
        );
        assert_eq!(output.status.code(), Some(1), "{attack}: {stderr}");
        assert!(stdout.is_empty(), "{attack}: {stdout}");
        assert!(stderr.contains(says), "{attack}: {stderr}");
    }
    Ok(())
}

const INVENTORY: &str = "fleet";

#[tokio::test]
async fn a_forged_profile_gets_no_token_through_client_go_and_tether_credential()
-> anyhow::Result<()> {
    let credential = testkit::locate_binary("tether-credential")?;
    let hostile = HostileEndpoint::start(Ipv4Addr::new(127, 0, 0, 2)).await?;
    let mut scenario = Scenario::start(1, PROBE).await?;
    let (_collector, published) = start_publishing(&mut scenario, INVENTORY, VICTIM, START).await?;
    let control_plane = scenario.env.control_plane().clone();
    let admin = control_plane.admin_client()?;
    let server = published["status"]["accessProviders"][0]["cluster"]["server"].clone();

    // The collector marked member1's Secret with the member and the server it published.
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SECRET_NAMESPACE);
    let what = format!("member1's Secret is marked with the member and {server}");
    eventually(&what, CONVERGE, || async {
        let meta = secrets.get(VICTIM).await.unwrap().metadata;
        let label = meta.labels.unwrap_or_default().remove("tether.io/member");
        let noted = meta
            .annotations
            .unwrap_or_default()
            .remove("tether.io/server");
        matching((label, noted), |(label, noted)| {
            label.as_deref() == Some(VICTIM) && noted.as_deref() == server.as_str()
        })
    })
    .await?;

    // The attacker may write ClusterProfiles: a profile of another manager (so the collector
    // leaves it alone) naming member1's Secret, with the hostile endpoint and its CA.
    let mut provider = access_provider(&hostile.url(), hostile.ca_pem(), VICTIM);
    provider["name"] = json!("tether");
    provider["cluster"]["extensions"][0]["extension"] = json!({
        "member": VICTIM,
        "secretRef": {"namespace": SECRET_NAMESPACE, "name": VICTIM},
    });
    let forged = json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": {"name": "forged", "labels": {"x-k8s.io/cluster-manager": "attacker"}},
        "spec": {"displayName": "forged", "clusterManager": {"name": "attacker"}},
        "status": {"accessProviders": [provider]},
    });
    let profiles =
        Api::<DynamicObject>::namespaced_with(admin, INVENTORY, &crd::cluster_profile_resource());
    let apply = PatchParams::apply("attacker").force();
    let forged = Patch::Apply(&forged);
    profiles.patch("forged", &apply, &forged).await?;
    profiles.patch_status("forged", &apply, &forged).await?;

    // The consumer may read the forged profile and member1's Secret: as much RBAC as a
    // legitimate consumer of member1 has.
    let dir = tempfile::tempdir()?;
    let consumer = Consumer::create(&control_plane, dir.path(), &credential, &[]).await?;
    grant_consumer(
        &control_plane,
        INVENTORY,
        &[VICTIM, "forged"],
        SECRET_NAMESPACE,
        &[VICTIM],
    )
    .await?;
    let member_token = scenario.registered_tokens[0].clone();
    let ns = scenario.namespace.clone();
    let read_once = |name| {
        let profile = ProfileRef {
            kubeconfig: &consumer.kubeconfig,
            namespace: INVENTORY,
            name,
            provider_file: &consumer.provider_file,
        };
        interop_client::command(&profile, &["--once", "--namespace", &ns])
    };

    let (status, lines, stderr) = interop_client::run(read_once("forged")?).await?;
    println!("forged: {status}: {lines:?} {stderr}");
    assert!(
        !hostile.saw_bearer(&member_token),
        "member1's token reached the hostile endpoint ({} requests)",
        hostile.requests()
    );
    assert!(
        !status.success() || lines.iter().all(|l| l["ok"] != true),
        "the forged profile got through: {lines:?}"
    );
    let said = format!("{lines:?} {stderr}");
    assert!(
        said.contains("records") && !said.contains(&member_token),
        "tether-credential's refusal, without the token: {said}"
    );

    // The published profile still works for the same consumer: the refusal is the forgery's.
    let (status, lines, stderr) = interop_client::run(read_once(VICTIM)?).await?;
    assert!(status.success(), "{status}: {lines:?} {stderr}");
    Ok(())
}
