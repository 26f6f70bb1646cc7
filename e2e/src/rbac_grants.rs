//! What rendered RBAC grants the collector, read from the objects: [`rbac_grants`] checks
//! the rules (no wildcards, no dangerous verbs, Secrets only through Roles, bindings only to
//! the collector's ServiceAccount) and lists every grant, one line per verb.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};
use serde_json::Value;

use crate::manifest::{ObjectId, of_kind, typed};

/// The collector's ServiceAccount (namespace, name), as every binding must name it.
pub const COLLECTOR_SA: (&str, &str) = ("tether-system", "tether-collector");

/// Checks the rendered RBAC and returns what it grants the collector, one line per verb:
/// `<cluster|namespace> <group>/<resource>[<names>] <verb>` (group `core` for "").
///
/// Fails on a wildcard, a non-resource URL, a Secret grant in a ClusterRole, a binding to any
/// other subject than the collector's ServiceAccount, a binding to a role the manifests do not
/// hold, and a role no binding uses.
pub fn rbac_grants(objects: &[Value]) -> anyhow::Result<BTreeSet<String>> {
    // (namespace, name) -> rules; namespace None for ClusterRoles.
    let mut roles = BTreeMap::<(Option<String>, String), Vec<PolicyRule>>::new();
    for object in of_kind(objects, "ClusterRole") {
        let role: ClusterRole = typed(object)?;
        let id = ObjectId::of(object)?;
        ensure!(role.aggregation_rule.is_none(), "{id}: aggregation");
        roles.insert((None, id.name), role.rules.unwrap_or_default());
    }
    for object in of_kind(objects, "Role") {
        let role: Role = typed(object)?;
        let id = ObjectId::of(object)?;
        roles.insert((id.namespace, id.name), role.rules.unwrap_or_default());
    }
    for ((namespace, name), rules) in &roles {
        let which = format!("{}/{name}", namespace.as_deref().unwrap_or("cluster"));
        for rule in rules {
            let fields = [
                rule.api_groups.as_deref().unwrap_or_default(),
                rule.resources.as_deref().unwrap_or_default(),
                &rule.verbs,
                rule.resource_names.as_deref().unwrap_or_default(),
            ];
            ensure!(
                !fields.iter().any(|f| f.iter().any(|v| v.contains('*'))),
                "{which}: a wildcard in {rule:?}"
            );
            ensure!(
                rule.non_resource_urls.is_none(),
                "{which}: non-resource URLs"
            );
            ensure!(
                !rule.verbs.iter().any(|v| matches!(
                    v.as_str(),
                    "escalate" | "bind" | "impersonate" | "delete" | "deletecollection"
                )),
                "{which}: a dangerous verb in {rule:?}"
            );
            let secrets = rule
                .resources
                .iter()
                .flatten()
                .any(|r| r == "secrets" || r.starts_with("secrets/"));
            ensure!(
                !(secrets && namespace.is_none()),
                "{which}: Secrets granted cluster-wide by a ClusterRole"
            );
        }
    }

    let collector = Subject {
        kind: "ServiceAccount".to_owned(),
        name: COLLECTOR_SA.1.to_owned(),
        namespace: Some(COLLECTOR_SA.0.to_owned()),
        api_group: None,
    };
    let mut grants = BTreeSet::new();
    let mut used = BTreeSet::new();
    let mut bindings = Vec::new();
    for object in of_kind(objects, "ClusterRoleBinding") {
        let binding: ClusterRoleBinding = typed(object)?;
        let id = ObjectId::of(object)?;
        ensure!(
            binding.role_ref.kind == "ClusterRole",
            "{id}: binds a {}",
            binding.role_ref.kind
        );
        bindings.push((id, None, (None, binding.role_ref.name), binding.subjects));
    }
    for object in of_kind(objects, "RoleBinding") {
        let binding: RoleBinding = typed(object)?;
        let id = ObjectId::of(object)?;
        let namespace = id
            .namespace
            .clone()
            .context("a RoleBinding without namespace")?;
        let role = match binding.role_ref.kind.as_str() {
            "Role" => (Some(namespace.clone()), binding.role_ref.name),
            "ClusterRole" => (None, binding.role_ref.name),
            other => bail!("{id}: binds a {other}"),
        };
        bindings.push((id, Some(namespace), role, binding.subjects));
    }
    for (binding, scope, role, subjects) in bindings {
        ensure!(
            subjects.as_deref() == Some(std::slice::from_ref(&collector)),
            "{binding}: binds {subjects:?}, not only the collector's ServiceAccount"
        );
        let rules = roles
            .get(&role)
            .with_context(|| format!("{binding}: its role {role:?} is not in the manifests"))?;
        used.insert(role.clone());
        let scope = scope.as_deref().unwrap_or("cluster");
        for rule in rules {
            let names = rule
                .resource_names
                .as_ref()
                .map(|n| format!("[{}]", n.join(",")))
                .unwrap_or_default();
            for group in rule.api_groups.iter().flatten() {
                let group = if group.is_empty() { "core" } else { group };
                for resource in rule.resources.iter().flatten() {
                    for verb in &rule.verbs {
                        grants.insert(format!("{scope} {group}/{resource}{names} {verb}"));
                    }
                }
            }
        }
    }
    let unused: Vec<_> = roles.keys().filter(|r| !used.contains(*r)).collect();
    ensure!(unused.is_empty(), "roles no binding uses: {unused:?}");
    Ok(grants)
}
