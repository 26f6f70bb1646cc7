//! RBAC on a member for users that client certificates name.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::{Api, api::Patch};
use serde_json::{Value, json};
use testkit::Cluster;

use super::capi_plane::apply_params;

/// The ClusterRole [`grant_reader_to_users`] binds: what the collector reads on a member.
pub const USER_READER_ROLE: &str = "tether-e2e-user-reader";

/// Binds `users` (as client certificates name them) on `member` to [`USER_READER_ROLE`]: get,
/// list and watch Nodes and Deployments, and get `/readyz`. Nothing else.
///
/// # Errors
/// API errors.
pub async fn grant_reader_to_users(member: &Cluster, users: &[&str]) -> anyhow::Result<()> {
    let client = member.admin_client()?;
    let read = ["get", "list", "watch"];
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": { "name": USER_READER_ROLE },
        "rules": [
            { "apiGroups": [""], "resources": ["nodes"], "verbs": read },
            { "apiGroups": ["apps"], "resources": ["deployments"], "verbs": read },
            { "nonResourceURLs": ["/readyz"], "verbs": ["get"] },
        ],
    }))?;
    Api::<ClusterRole>::all(client.clone())
        .patch(USER_READER_ROLE, &apply_params(), &Patch::Apply(&role))
        .await?;
    let subjects: Vec<Value> = users
        .iter()
        .map(|u| json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u }))
        .collect();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": { "name": USER_READER_ROLE },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": USER_READER_ROLE,
        },
        "subjects": subjects,
    }))?;
    Api::<ClusterRoleBinding>::all(client)
        .patch(USER_READER_ROLE, &apply_params(), &Patch::Apply(&binding))
        .await?;
    Ok(())
}
