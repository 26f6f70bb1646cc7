//! Who may read the collector's `/metrics` and `/api/...`, against a real control plane: a
//! ServiceAccount bound to the shipped `tether-api-reader` ClusterRole reads (200), one without
//! the binding is refused (403), no token or a token the apiserver does not accept is 401, and
//! `/healthz`/`/readyz` stay open without saying who or why.

use std::time::Duration;

use e2e::{
    limits::{HOUR, PROBE},
    manifest::{kustomize_build, kustomize_dir},
    manifest_apply::{apply_object, apply_rbac_for_real},
    rbac_grants::api_reader_role,
    scenario::Scenario,
};
use testkit::{eventually, http_get_as, matching};

const LIMIT: Duration = Duration::from_secs(30);
const PATHS: [&str; 2] = ["/api/v1/clusters", "/metrics"];

#[tokio::test]
async fn only_readers_bound_to_the_api_reader_role_read_the_api_and_metrics() -> anyhow::Result<()>
{
    let s = Scenario::start_healthy(1, PROBE).await?;
    let cp = s.env.control_plane();
    let admin = cp.admin_client()?;

    // The shipped reader role, bound to `reader` only, as the docs say to.
    let base = kustomize_build(&kustomize_dir("base"))?;
    let role = api_reader_role(&base)?;
    let is_role = |o: &&serde_json::Value| o["metadata"]["name"] == role.as_str();
    let role_objects: Vec<_> = base.iter().filter(is_role).cloned().collect();
    apply_rbac_for_real(&admin, &role_objects).await?;
    let ns = cp.create_namespace("readers").await?;
    for sa in ["reader", "stranger"] {
        cp.create_service_account(&ns, sa).await?;
    }
    apply_object(
        &admin,
        &serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": { "name": "reader-tether-api-reader" },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
            "subjects": [{ "kind": "ServiceAccount", "name": "reader", "namespace": ns }],
        }),
    ).await?;
    let reader = cp.mint_token(&ns, "reader", HOUR).await?;
    let stranger = cp.mint_token(&ns, "stranger", HOUR).await?;
    let addr = s.collector.addr;

    // The binding reaches the apiserver's authorizer through an informer: wait for it. A 403
    // seen meanwhile is cached for the gate's TTL, so this can take that long.
    for path in PATHS {
        eventually(&format!("the reader gets {path}"), LIMIT, || async {
            let answer = http_get_as(addr, path, Some(&reader)).await.unwrap();
            matching(answer, |(status, _)| *status == 200)
        })
        .await?;
    }
    let (_, clusters) = http_get_as(addr, "/api/v1/clusters", Some(&reader)).await?;
    assert!(clusters.contains("\"member1\""), "{clusters}");

    for path in PATHS {
        let (status, body) = http_get_as(addr, path, Some(&stranger)).await?;
        assert_eq!(status, 403, "stranger: {path} {body}");
        assert!(!body.contains("stranger") && !body.contains(&ns), "{body}");
        let (status, _) = http_get_as(addr, path, None).await?;
        assert_eq!(status, 401, "no token: {path}");
        let forged = format!("{reader}x");
        let (status, body) = http_get_as(addr, path, Some(&forged)).await?;
        assert_eq!(status, 401, "a forged token: {path}");
        assert!(!body.contains(&forged), "{body}");
    }

    // Open, and saying nothing about identities.
    for path in ["/healthz", "/readyz"] {
        let answer = http_get_as(addr, path, None).await?;
        assert_eq!(answer, (200, "ok".to_owned()), "{path}");
    }
    Ok(())
}
