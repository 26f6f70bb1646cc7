//! What the apiserver's authorizer lets the collector and an API reader do once the rendered
//! RBAC is applied for real.

use std::time::Duration;

use e2e::{
    access_review::{Request, allowed, allowed_url},
    manifest_apply::{apply_object, apply_rbac_for_real},
    rbac_grants::{API_READER_COMPONENT, api_reader_role},
};
use kube::Client;
use serde_json::Value;
use testkit::eventually;

use super::{
    FEDERATES, FORBIDDEN, LEASES, PUBLISH_FORBIDDEN, PUBLISHES, READS, ROTATES, SHARDS, WRITES,
    Writes, requests,
};

/// How long the RBAC authorizer's informer may take to see new grants.
const SEEN: Duration = Duration::from_secs(20);

/// Applies the RBAC for real and asks the apiserver's authorizer what the collector may do.
pub async fn assert_authorized(client: &Client, objects: &[Value], writes: impl Into<Writes>) {
    let writes = writes.into();
    apply_rbac_for_real(client, objects).await.unwrap();
    let mut must_allow: Vec<Request> = requests(READS);
    let mut must_deny: Vec<Request> = requests(&[FORBIDDEN, PUBLISH_FORBIDDEN].concat());
    for (lines, allowed) in [
        (WRITES, writes.status),
        (PUBLISHES, writes.profiles),
        (ROTATES, writes.tokens),
        (SHARDS, writes.shards),
        (FEDERATES, writes.federated),
        (LEASES, writes.status || writes.profiles || writes.tokens),
    ] {
        if allowed {
            must_allow.extend(requests(lines));
        } else {
            must_deny.extend(requests(lines));
        }
    }
    // The RBAC authorizer reads roles through an informer: wait until the grants are seen.
    let what = "the collector may do all it needs";
    eventually(what, SEEN, || async {
        for request in &must_allow {
            if !allowed(client, *request).await.unwrap() {
                return Err(format!("it may not {request:?}"));
            }
        }
        Ok(())
    })
    .await
    .unwrap();
    for request in &must_deny {
        assert!(
            !allowed(client, *request).await.unwrap(),
            "the collector may {request:?}"
        );
    }
    assert_api_readers(client, objects).await;
}

/// Binds the API reader ClusterRole to a scraper, as the docs tell users to, and asks the
/// authorizer the collector's questions: the scraper may `get` /metrics and /api/..., and
/// nothing else; an unbound identity may not.
async fn assert_api_readers(client: &Client, objects: &[Value]) {
    let role = api_reader_role(objects).unwrap();
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {
            "name": "scraper-tether-api-reader",
            "labels": { "app.kubernetes.io/component": API_READER_COMPONENT },
        },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "scraper" }],
    });
    apply_object(client, &binding).await.unwrap();
    // The paths the collector reviews for /metrics, /api/v1/clusters and a member's objects.
    let paths = [
        "/metrics",
        "/tether/api/v1/clusters",
        "/tether/api/v1/clusters/m1/apps/v1/deployments",
    ];
    eventually("the scraper may get its paths", SEEN, || async {
        for path in paths {
            if !allowed_url(client, "scraper", path).await.unwrap() {
                return Err(format!("it may not get {path}"));
            }
        }
        Ok(())
    })
    .await
    .unwrap();
    // An unbound identity gets none of them; the scraper nothing the role does not grant, nor
    // Kubernetes' defaults grant every authenticated identity.
    let unbound = paths.map(|path| ("someone-else", path));
    let ungranted = ["/debug/pprof/", "/logs/", "/tether/other"].map(|path| ("scraper", path));
    for (user, path) in unbound.into_iter().chain(ungranted) {
        let may = allowed_url(client, user, path).await.unwrap();
        assert!(!may, "{user} may get {path}");
    }
}
