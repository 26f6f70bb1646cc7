//! Shared by the `deploy_*` e2e suites: what the deploy manifests must grant the collector,
//! checked on the rendered RBAC and by the apiserver's authorizer, and the collector's
//! Deployment and Service ([`workload`]).
#![allow(dead_code, unused_imports, reason = "each suite uses a different part")]

mod authorizer;
pub mod network;
pub mod workload;

pub use authorizer::assert_authorized;

use std::collections::BTreeSet;

use e2e::{
    access_review::Request,
    manifest::ObjectId,
    rbac_grants::{api_reader_role, rbac_grants},
};
use serde_json::Value;

/// Karmada's namespace of member Secrets: Karmada creates it, the manifests only use it.
pub const KARMADA_SECRETS: &str = "karmada-cluster";
/// Where Events about cluster-scoped `Cluster`s are recorded; every cluster has it.
pub const EVENTS_NAMESPACE: &str = "default";

/// The id of `object`, which the renderers have checked.
pub fn id(object: &Value) -> ObjectId {
    ObjectId::of(object).unwrap()
}

/// Expands `"<scope> <group>/<resource> <verb>,<verb>"` lines into [`rbac_grants`] lines.
pub fn grants(lines: &[&str]) -> BTreeSet<String> {
    lines
        .iter()
        .flat_map(|line| {
            let (what, verbs) = line.rsplit_once(' ').unwrap();
            verbs.split(',').map(move |verb| format!("{what} {verb}"))
        })
        .collect()
}

/// What the collector needs to read Karmada members and to review readers of its API: the
/// only grants beside Karmada.
pub const READ_GRANTS: &[&str] = &[
    "cluster cluster.karmada.io/clusters get,list,watch",
    "karmada-cluster core/secrets get,list,watch",
    "cluster authentication.k8s.io/tokenreviews create",
    "cluster authorization.k8s.io/subjectaccessreviews create",
];

/// What writing status adds: the status subresource and Events (and [`LEASE_GRANTS`]).
pub const WRITE_GRANTS: &[&str] = &[
    "cluster cluster.karmada.io/clusters/status update,patch",
    "default events.k8s.io/events create,patch",
];

/// The leader-election Lease, for writing status or publishing ClusterProfiles.
pub const LEASE_GRANTS: &[&str] = &[
    "tether-system coordination.k8s.io/leases create",
    "tether-system coordination.k8s.io/leases[tether-collector] get,update,patch",
];

/// The shard Leases (`--shards auto`): each replica's own, named after its pod, and the
/// group's, read together.
pub const SHARD_GRANTS: &[&str] =
    &["tether-system coordination.k8s.io/leases create,get,list,update"];

/// The namespace the deploy tests publish ClusterProfiles in.
pub const PROFILES_NAMESPACE: &str = "fleet";

/// What publishing ClusterProfiles in [`PROFILES_NAMESPACE`] adds (and [`LEASE_GRANTS`]).
/// The Secret `patch` marks each member's credential Secret for `tether-credential`.
pub const PUBLISH_GRANTS: &[&str] = &[
    "fleet multicluster.x-k8s.io/clusterprofiles get,list,create,patch,delete",
    "fleet multicluster.x-k8s.io/clusterprofiles/status patch",
    "karmada-cluster core/secrets patch",
];

/// What rotating member tokens adds (and [`LEASE_GRANTS`]): writing each minted token back
/// into its Secret, and Events on that Secret.
pub const ROTATION_GRANTS: &[&str] = &[
    "karmada-cluster core/secrets update",
    "karmada-cluster events.k8s.io/events create,patch",
];

/// What federated members add (`--federated-service-account`): tokens of the collector's own
/// ServiceAccount, minted on the control plane, and of no other.
pub const FEDERATION_GRANTS: &[&str] =
    &["tether-system core/serviceaccounts/token[tether-collector] create"];

/// What the collector is to write: Cluster status, ClusterProfiles, member tokens, federated
/// members' tokens.
#[derive(Clone, Copy, Debug)]
pub struct Writes {
    /// `--write-status`.
    pub status: bool,
    /// `--publish-clusterprofiles` (in [`PROFILES_NAMESPACE`]).
    pub profiles: bool,
    /// `--mint-tokens`.
    pub tokens: bool,
    /// `--shards auto`.
    pub shards: bool,
    /// `--federated-service-account` (the collector's own).
    pub federated: bool,
}

impl Writes {
    /// Status written or not, nothing else: the manifests without publishing.
    pub const fn status(status: bool) -> Self {
        Self {
            status,
            profiles: false,
            tokens: false,
            shards: false,
            federated: false,
        }
    }
}

impl From<bool> for Writes {
    fn from(status: bool) -> Self {
        Self::status(status)
    }
}

pub fn expected_grants(writes: impl Into<Writes>) -> BTreeSet<String> {
    let writes = writes.into();
    let lease = writes.status || writes.profiles || writes.tokens;
    [
        (true, READ_GRANTS),
        (writes.status, WRITE_GRANTS),
        (writes.profiles, PUBLISH_GRANTS),
        (writes.tokens, ROTATION_GRANTS),
        (lease, LEASE_GRANTS),
        (writes.shards, SHARD_GRANTS),
        (writes.federated, FEDERATION_GRANTS),
    ]
    .into_iter()
    .filter(|(wanted, _)| *wanted)
    .flat_map(|(_, lines)| grants(lines))
    .collect()
}

pub fn assert_rbac(objects: &[Value], writes: impl Into<Writes>, what: &str) {
    let actual = rbac_grants(objects).unwrap_or_else(|err| panic!("{what}: {err:#}"));
    let expected = expected_grants(writes);
    let extra: Vec<_> = actual.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&actual).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{what}: RBAC grants more than expected: {extra:#?}\nand lacks: {missing:#?}"
    );
    api_reader_role(objects).unwrap_or_else(|err| panic!("{what}: {err:#}"));
}

/// Expands [`grants`]-style lines, with `[name]` naming one object, into the requests whose
/// authorization the apiserver is asked about.
pub fn requests(lines: &[&'static str]) -> Vec<Request> {
    lines
        .iter()
        .flat_map(|line| {
            let (scope, rest) = line.split_once(' ').unwrap();
            let (what, verbs) = rest.rsplit_once(' ').unwrap();
            let (what, name) = what
                .strip_suffix(']')
                .map_or((what, ""), |what| what.split_once('[').unwrap());
            let (group, resource) = what.split_once('/').unwrap();
            let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
            let namespace = if scope == "cluster" { "" } else { scope };
            let group = if group == "core" { "" } else { group };
            verbs
                .split(',')
                .map(move |verb| (namespace, group, resource, subresource, name, verb))
        })
        .collect()
}

/// What the collector does; all must be allowed.
pub const READS: &[&str] = &[
    "cluster cluster.karmada.io/clusters list,watch",
    "karmada-cluster core/secrets list,watch",
    "karmada-cluster core/secrets[member1] get",
    "cluster authentication.k8s.io/tokenreviews create",
    "cluster authorization.k8s.io/subjectaccessreviews create",
];
pub const WRITES: &[&str] = &[
    "cluster cluster.karmada.io/clusters/status[member1] patch",
    "default events.k8s.io/events create",
    "default events.k8s.io/events[e] patch",
];
pub const LEASES: &[&str] = &[
    "tether-system coordination.k8s.io/leases create",
    "tether-system coordination.k8s.io/leases[tether-collector] patch,get",
];
pub const PUBLISHES: &[&str] = &[
    "fleet multicluster.x-k8s.io/clusterprofiles list,create",
    "fleet multicluster.x-k8s.io/clusterprofiles[member1] get,patch",
    "fleet multicluster.x-k8s.io/clusterprofiles[ghost] delete",
    "fleet multicluster.x-k8s.io/clusterprofiles/status[member1] patch",
    "karmada-cluster core/secrets[member1] patch",
];
/// What publishing never allows: profiles anywhere else, or all of them at once.
pub const PUBLISH_FORBIDDEN: &[&str] = &[
    "default multicluster.x-k8s.io/clusterprofiles create",
    "default multicluster.x-k8s.io/clusterprofiles[member1] delete",
    "cluster multicluster.x-k8s.io/clusterprofiles list",
    "fleet multicluster.x-k8s.io/clusterprofiles deletecollection",
    "fleet core/secrets list",
];
/// What rotating tokens does: a minted token written back, an Event on its Secret.
pub const ROTATES: &[&str] = &[
    "karmada-cluster core/secrets[member1] update",
    "karmada-cluster events.k8s.io/events create",
];
/// What a sharded replica does with the Leases of its group.
pub const SHARDS: &[&str] = &[
    "tether-system coordination.k8s.io/leases list",
    "tether-system coordination.k8s.io/leases[tether-shard-pod-1] get,update",
];
/// What a federated member's token takes: a TokenRequest for the collector's own ServiceAccount.
pub const FEDERATES: &[&str] =
    &["tether-system core/serviceaccounts/token[tether-collector] create"];
/// What the collector must never be able to do.
pub const FORBIDDEN: &[&str] = &[
    "kube-system events.k8s.io/events create",
    "default core/events create",
    "cluster core/secrets list",
    "kube-system core/secrets list",
    "tether-system core/secrets get",
    "karmada-cluster core/secrets create",
    "tether-system core/secrets[member1] update",
    "cluster cluster.karmada.io/clusters[member1] patch,delete",
    "cluster cluster.karmada.io/clusters create",
    "tether-system coordination.k8s.io/leases[someone-else] patch",
    "tether-system coordination.k8s.io/leases[tether-shard-pod-1] delete",
    "kube-system coordination.k8s.io/leases create",
    "cluster rbac.authorization.k8s.io/clusterroles create",
    // Federated members' tokens are its own ServiceAccount's, never another's.
    "tether-system core/serviceaccounts/token[default] create",
    "kube-system core/serviceaccounts/token[tether-collector] create",
    "tether-system core/serviceaccounts create",
];
