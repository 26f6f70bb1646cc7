//! The registry against a real control plane holding Argo CD cluster Secrets, and a real
//! member apiserver the resulting clients talk to.

mod registry_support;

use registry_support::loopback_policy;

use base64::Engine as _;
use cluster_registry::{ArgoCdConfig, RegistryBuilder, RegistryEvent};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use member_client::{CredentialKey, FailureKind};
use registry_support::{
    Agents, expect_invalid, expect_usable_again, list_namespaces, member_client, next_event,
    next_upserted, whoami,
};
use serde_json::json;
use testkit::Environment;

fn config(token: &str, ca_pem: &str) -> String {
    json!({
        "bearerToken": token,
        "tlsClientConfig": {
            "caData": base64::engine::general_purpose::STANDARD.encode(ca_pem),
            "insecure": false,
        },
    })
    .to_string()
}

#[tokio::test]
async fn argocd_cluster_secret_follows_rotation_garbage_and_deletion() -> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let (cp, member) = (env.control_plane(), env.cluster(1));
    let admin = cp.admin_client()?;
    let agents = Agents::create(member).await?;
    let ns = cp.create_namespace("argocd").await?;
    let secrets = Api::<Secret>::namespaced(admin.clone(), &ns);
    let cluster_secret = json!({
        "metadata": {
            "name": "cluster-member1",
            "labels": { "argocd.argoproj.io/secret-type": "cluster" },
        },
        "stringData": {
            "name": "member1",
            "server": member.endpoint(),
            "config": config(&agents.token_a, member.ca_pem()),
        },
    });
    // An unlabelled Secret beside it is not a cluster.
    let unlabelled = json!({
        "metadata": { "name": "not-a-cluster" },
        "stringData": { "name": "ghost", "server": member.endpoint(), "config": "{}" },
    });
    for secret in [cluster_secret, unlabelled] {
        let secret: Secret = serde_json::from_value(secret)?;
        secrets.create(&PostParams::default(), &secret).await?;
    }

    let argocd = ArgoCdConfig {
        namespaces: vec![ns.clone()],
    };
    let (registry, mut events, driver) = RegistryBuilder::new()
        .endpoint_policy(loopback_policy())
        .argocd(admin.clone(), argocd)
        .build();
    let driver = tokio::spawn(driver.run());

    let upserted = next_upserted(&mut events).await?;
    let spec = &upserted.0;
    assert_eq!(spec.name, "member1");
    assert_eq!(spec.secret_ref, CredentialKey::new(&ns, "cluster-member1"));
    let client = member_client(&registry, &upserted)?;
    assert_eq!(whoami(&client).await?, agents.user("agent-a"));
    assert_eq!(registry.state("ghost"), None);

    // Rotate to agent-b inside the config JSON.
    let set_config = async |config: String| {
        let patch = Patch::Merge(json!({ "stringData": { "config": config } }));
        let params = PatchParams::default();
        secrets
            .patch("cluster-member1", &params, &patch)
            .await
            .unwrap();
    };
    set_config(config(&agents.token_b, member.ca_pem())).await;
    assert_eq!(
        next_event(&mut events).await?,
        RegistryEvent::CredentialsRotated {
            name: "member1".into(),
            secret: CredentialKey::new(&ns, "cluster-member1"),
        }
    );
    assert_eq!(whoami(&client).await?, agents.user("agent-b"));

    // Garbage JSON in config.
    set_config("{not json".into()).await;
    let event = next_event(&mut events).await?;
    expect_invalid(&event, "member1", "SecretInvalid")?;
    assert_eq!(
        list_namespaces(&client).await,
        Err(FailureKind::CredentialUnavailable)
    );

    // Repaired, then deleted: for Argo CD the Secret *is* the definition, so it is Removed.
    set_config(config(&agents.token_b, member.ca_pem())).await;
    let event = next_event(&mut events).await?;
    expect_usable_again(event, &client).await?;
    secrets
        .delete("cluster-member1", &DeleteParams::default())
        .await?;
    assert_eq!(
        next_event(&mut events).await?,
        RegistryEvent::Removed("member1".into())
    );
    assert_eq!(
        list_namespaces(&client).await,
        Err(FailureKind::CredentialUnavailable)
    );
    driver.abort();
    Ok(())
}
