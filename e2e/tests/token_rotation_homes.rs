//! Where else a rotated token lives: an Argo CD cluster Secret's `config.bearerToken` (every
//! other field kept) and a member file's token file, replaced in place with no control plane.

use std::time::Duration;

use base64::Engine as _;
use cluster_registry::minting::{
    EXPIRATION_ANNOTATION, MINT_ANNOTATION, RECORD_ANNOTATION, SERVICE_ACCOUNT_ANNOTATION,
};
use e2e::{
    collector_run::{RunningCollector, temp_dir},
    rotation_plane::{RotationPlane, rotations},
};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, api::PostParams};
use serde_json::json;
use testkit::eventually;

/// Start-up: the registry lists, the member clients connect, the watches list.
const START: Duration = Duration::from_secs(60);
/// A 600 s token is replaced after 6 s at this fraction, and a member probed every 2 s.
const FAST: [&str; 4] = ["--mint-at-fraction", "0.01", "--probe-period", "2"];

/// A plane with no Karmada member, and ServiceAccount `tether-rotation/<account>` on its
/// apiserver with a fresh 600 s token, which it returns: the seed of a member defined elsewhere.
async fn start_with_account(account: &str) -> anyhow::Result<(RotationPlane, String)> {
    let plane = RotationPlane::start(1, 0).await?;
    let member = plane.env.cluster(1);
    let ns = "tether-rotation";
    member.create_service_account(ns, account).await?;
    let token = member.mint_token(ns, account, testkit::MIN_TOKEN_EXPIRY);
    let token = token.await?;
    Ok((plane, token))
}

#[tokio::test]
async fn an_argocd_secret_gets_each_new_token_in_its_config_and_keeps_the_rest()
-> anyhow::Result<()> {
    let (plane, seeded) = start_with_account("argocd-manager").await?;
    let member = plane.env.cluster(1);
    let ca_data = base64::engine::general_purpose::STANDARD.encode(member.ca_pem());
    let control_plane = plane.env.control_plane();
    control_plane.create_namespace_named("argocd").await?;
    let secrets = Api::<Secret>::namespaced(control_plane.admin_client()?, "argocd");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": "cluster-argo1",
            "labels": { "argocd.argoproj.io/secret-type": "cluster" },
            "annotations": {
                SERVICE_ACCOUNT_ANNOTATION: "tether-rotation/argocd-manager",
                MINT_ANNOTATION: "true",
                EXPIRATION_ANNOTATION: "600",
            },
        },
        "stringData": {
            "name": "argo1",
            "server": member.endpoint(),
            "project": "platform",
            "config": json!({
                "bearerToken": seeded,
                "tlsClientConfig": { "caData": ca_data, "insecure": false },
            }).to_string(),
        },
    }))?;
    secrets.create(&PostParams::default(), &secret).await?;
    let source = ["--members-from", "argocd", "--argocd-namespace", "argocd"];
    let flags = [&source[..], &["--mint-tokens"], &FAST].concat();
    let collector = plane.start_collector(&flags).await?;

    eventually("argo1 rotates twice", START, || async {
        rotations(&collector, "argo1", "success").await >= 2.0
    })
    .await?;
    let written = secrets.get("cluster-argo1").await?;
    let data = written.data.unwrap();
    let config: serde_json::Value = serde_json::from_slice(&data["config"].0)?;
    let token = config["bearerToken"].as_str().unwrap();
    assert_ne!(token, seeded);
    let kept_ca = &config["tlsClientConfig"]["caData"];
    assert_eq!(kept_ca, ca_data.as_str(), "the rest is kept");
    assert_eq!(data["project"].0, b"platform");
    assert_eq!(member.token_status(token).await?, 200);
    let record = &written.metadata.annotations.unwrap()[RECORD_ANNOTATION];
    assert!(record.contains("mintedAt"), "{record}");
    // Ready on its new token.
    collector.wait_member_ready("argo1", START).await?;
    let unauthorized = collector.metric("tether_unauthorized_responses_total", "");
    assert_eq!(unauthorized.await?, 0.0);
    Ok(())
}

#[tokio::test]
async fn a_member_file_token_is_replaced_in_place_without_a_control_plane() -> anyhow::Result<()> {
    let (plane, seeded) = start_with_account("filed").await?;
    let member = plane.env.cluster(1);
    let dir = temp_dir("members")?;
    std::fs::write(dir.join("filed.token"), &seeded)?;
    std::fs::write(dir.join("filed-ca.crt"), member.ca_pem())?;
    std::fs::write(
        dir.join("filed.yaml"),
        format!(
            "name: filed\napiEndpoint: {}\ntokenFile: filed.token\ncaFile: filed-ca.crt\n\
             rotation:\n  serviceAccount: tether-rotation/filed\n  enabled: true\n  \
             expirationSeconds: 600\n",
            member.endpoint()
        ),
    )?;
    let members_dir = dir.display().to_string();
    let source = ["--members-from", "directory", "--members-dir", &members_dir];
    // Minting is the operator's decision: the file's `enabled: true` alone mints nothing.
    let mint = ["--insecure-serve-api", "--mint-tokens-for", "filed"];
    let args: Vec<String> = [&source[..], &mint, &FAST]
        .concat()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let collector = RunningCollector::start(&args).await?;

    eventually("filed rotates", START, || async {
        rotations(&collector, "filed", "success").await >= 1.0
    })
    .await?;
    let token = std::fs::read_to_string(dir.join("filed.token"))?;
    assert_ne!(token, seeded);
    assert_eq!(member.token_status(&token).await?, 200);
    let record = std::fs::read_to_string(dir.join(".filed.token.rotation"))?;
    assert!(record.contains("mintedAt"), "{record}");
    // Ready on its new token.
    collector.wait_member_ready("filed", START).await?;
    Ok(())
}
