//! What rendered RBAC grants the collector, read from the objects: [`rbac_grants`] checks
//! the rules (no wildcards, no dangerous verbs, Secrets only through Roles, bindings only to
//! the collector's ServiceAccount) and lists every grant, one line per verb. The ClusterRole
//! for readers of the collector's API ([`API_READER_COMPONENT`]) is not the collector's: it is
//! checked apart by [`api_reader_role`].

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};
use serde_json::Value;

use crate::manifest::{ObjectId, of_kind, typed};

/// The collector's ServiceAccount (namespace, name), as every binding must name it.
pub const COLLECTOR_SA: (&str, &str) = ("tether-system", "tether-collector");

/// The `app.kubernetes.io/component` label of the ClusterRole (and any binding) for readers of
/// the collector's `/metrics` and `/api/...`.
pub const API_READER_COMPONENT: &str = "api-reader";

/// The non-resource URLs the API reader role grants `get` on (the collector reviews its read
/// API's paths under `/tether`).
pub const API_READER_URLS: &[&str] = &["/metrics", "/tether/api/*"];

fn is_api_reader(object: &Value) -> bool {
    object.pointer("/metadata/labels/app.kubernetes.io~1component")
        == Some(&Value::from(API_READER_COMPONENT))
}

/// The name of the one ClusterRole for readers of the collector's API, after checking that it
/// grants exactly `get` on [`API_READER_URLS`] and nothing else.
///
/// # Errors
/// None or several such roles, or other rules.
pub fn api_reader_role(objects: &[Value]) -> anyhow::Result<String> {
    let roles: Vec<&Value> = of_kind(objects, "ClusterRole")
        .filter(|o| is_api_reader(o))
        .collect();
    ensure!(roles.len() == 1, "{} API reader ClusterRoles", roles.len());
    let role: ClusterRole = typed(roles[0])?;
    let rules = role.rules.unwrap_or_default();
    let expected = PolicyRule {
        non_resource_urls: Some(API_READER_URLS.iter().map(|&u| u.to_owned()).collect()),
        verbs: vec!["get".to_owned()],
        ..PolicyRule::default()
    };
    ensure!(rules == [expected], "the API reader role grants {rules:?}");
    Ok(ObjectId::of(roles[0])?.name)
}

/// Whether `rule` names ClusterProfiles and nothing else: the one kind the collector deletes
/// (the profiles of members that are gone), and only through a Role.
fn deletes_only_profiles(rule: &PolicyRule) -> bool {
    rule.api_groups.as_deref() == Some(&["multicluster.x-k8s.io".to_owned()][..])
        && rule.resources.as_deref() == Some(&["clusterprofiles".to_owned()][..])
}

/// Checks the rendered RBAC and returns what it grants the collector, one line per verb:
/// `<cluster|namespace> <group>/<resource>[<names>] <verb>` (group `core` for "").
///
/// Fails on a wildcard, a non-resource URL, a dangerous verb (`delete` is one except on
/// ClusterProfiles in a Role), a Secret grant in a ClusterRole, a binding to any
/// other subject than the collector's ServiceAccount, a binding to a role the manifests do not
/// hold, and a role no binding uses.
pub fn rbac_grants(objects: &[Value]) -> anyhow::Result<BTreeSet<String>> {
    // (namespace, name) -> rules; namespace None for ClusterRoles.
    let mut roles = BTreeMap::<(Option<String>, String), Vec<PolicyRule>>::new();
    for object in of_kind(objects, "ClusterRole").filter(|o| !is_api_reader(o)) {
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
                    "escalate" | "bind" | "impersonate" | "deletecollection"
                )),
                "{which}: a dangerous verb in {rule:?}"
            );
            ensure!(
                !rule.verbs.iter().any(|v| v == "delete")
                    || (namespace.is_some() && deletes_only_profiles(rule)),
                "{which}: delete on anything but ClusterProfiles in their namespace: {rule:?}"
            );
            let is_secrets = |r: &String| r == "secrets" || r.starts_with("secrets/");
            let secrets = rule.resources.iter().flatten().any(is_secrets);
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
    for object in of_kind(objects, "ClusterRoleBinding").filter(|o| !is_api_reader(o)) {
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
