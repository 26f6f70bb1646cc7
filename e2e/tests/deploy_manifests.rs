//! The deploy manifests (`deploy/kustomize`, `deploy/helm`) against a real kube-apiserver.
//!
//! Every rendered object is sent to the harness's control plane with a server-side apply
//! dry-run and strict field validation, so the apiserver's own schema, defaulting and admission
//! judge it; Namespaces (and the namespaces the manifests expect to exist, such as Karmada's
//! `karmada-cluster`) are created for real first, since a namespaced dry-run needs its
//! namespace. The RBAC is read back from the rendered objects (no wildcards, Secrets only
//! through Roles, the exact set of grants) and, once applied for real, checked with
//! SubjectAccessReviews by the apiserver's own RBAC authorizer. The Deployment's arguments are
//! parsed with the collector's real command line, and the collector is run once as the base's
//! ServiceAccount with the base's RBAC alone.
//!
//! # Rendering
//! No kustomize binary is needed: [`kustomize_build`] is a minimal renderer covering only what
//! our kustomizations use (`resources` files and directories, inline JSON 6902 `add` patches
//! with a `target`, `$patch: delete` patches). It refuses anything else rather than render it
//! wrongly, and the ignored test `minimal_renderer_agrees_with_kubectl_kustomize` compares it
//! with `kubectl kustomize` where kubectl is installed (`KUBECTL` or `kubectl` on `PATH`).
//! The Helm chart needs a `helm` binary (`HELM` or `helm` on `PATH`): its test is ignored by
//! default and fails when run without one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail, ensure};
use clap::Parser as _;
use collector::cli::{Args, LogFormat, MembersFrom};
use e2e::{
    collector_run::{RunningCollector, control_plane_args},
    karmada_plane,
};
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
        coordination::v1::Lease,
        core::v1::{Container, Service},
        events::v1::Event,
        rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject},
    },
    apimachinery::pkg::{api::resource::Quantity, util::intstr::IntOrString},
    serde::{Deserialize as _, de::DeserializeOwned},
};
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams, Patch, PatchParams, PostParams},
    core::TypeMeta,
    discovery::{Discovery, Scope},
};
use serde_json::Value;
use testkit::Environment;

/// Field manager of the applies.
const MANAGER: &str = "tether-e2e";
/// The collector's ServiceAccount (namespace, name), as every binding must name it.
const COLLECTOR_SA: (&str, &str) = ("tether-system", "tether-collector");
/// Karmada's namespace of member Secrets: Karmada creates it, the manifests only use it.
const KARMADA_SECRETS: &str = "karmada-cluster";
/// Where Events about cluster-scoped `Cluster`s are recorded; every cluster has it.
const EVENTS_NAMESPACE: &str = "default";
/// Where kubelet mounts the pod's projected ServiceAccount token.
const PROJECTED_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e/ has a parent")
        .to_owned()
}

fn kustomize_dir(rel: &str) -> PathBuf {
    repo_root().join("deploy/kustomize").join(rel)
}

fn generated_crd_path() -> PathBuf {
    repo_root().join("deploy/crds/cluster.karmada.io_clusters.yaml")
}

// ---------------------------------------------------------------------------------------------
// Objects

/// What identifies an object to kustomize and to the apiserver.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ObjectId {
    api_version: String,
    kind: String,
    namespace: Option<String>,
    name: String,
}

impl ObjectId {
    fn of(object: &Value) -> anyhow::Result<Self> {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Ok(Self {
            api_version: text("/apiVersion").context("an object without apiVersion")?,
            kind: text("/kind").context("an object without kind")?,
            namespace: text("/metadata/namespace"),
            name: text("/metadata/name").context("an object without metadata.name")?,
        })
    }

    fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    fn version(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or(self.api_version.as_str(), |(_, version)| version)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)?;
        match &self.namespace {
            Some(ns) => write!(f, " {ns}/{}", self.name),
            None => write!(f, " {}", self.name),
        }
    }
}

fn id(object: &Value) -> ObjectId {
    ObjectId::of(object).unwrap()
}

/// The YAML documents of `text` as JSON values; empty documents are skipped.
fn parse_documents(text: &str, origin: &str) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value =
            Value::deserialize(document).with_context(|| format!("parsing YAML in {origin}"))?;
        if !value.is_null() {
            ObjectId::of(&value).with_context(|| format!("an object in {origin}"))?;
            objects.push(value);
        }
    }
    Ok(objects)
}

fn load_documents(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_documents(&text, &path.display().to_string())
}

fn of_kind<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    objects
        .iter()
        .filter(move |o| o.get("kind").and_then(Value::as_str) == Some(kind))
}

fn typed<T: DeserializeOwned>(object: &Value) -> T {
    serde_json::from_value(object.clone())
        .unwrap_or_else(|err| panic!("{} does not read as its type: {err}", id(object)))
}

// ---------------------------------------------------------------------------------------------
// A minimal kustomize

/// Renders the kustomization in `dir` as `kustomize build` does, for the subset of kustomize
/// our kustomizations use: `resources` (YAML files in or below `dir`, as kustomize's load
/// restrictor demands, and directories holding a kustomization), then `patches` that are
/// either inline JSON 6902 `add` operations with a `target`, or an inline `$patch: delete`.
/// Any other field is an error, never silently ignored. Output order is the order of
/// `resources`, not kustomize's kind order.
fn kustomize_build(dir: &Path) -> anyhow::Result<Vec<Value>> {
    let file = dir.join("kustomization.yaml");
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let kustomization: serde_yaml::Mapping =
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
    for (key, value) in &kustomization {
        match key.as_str() {
            Some("apiVersion") => ensure!(
                value.as_str() == Some("kustomize.config.k8s.io/v1beta1"),
                "{}: apiVersion {value:?}",
                file.display()
            ),
            Some("kind") => ensure!(
                value.as_str() == Some("Kustomization"),
                "{}: only kind Kustomization is implemented, not {value:?}",
                file.display()
            ),
            Some("resources" | "patches") => {}
            other => bail!(
                "{}: `{other:?}` is not implemented by this minimal renderer",
                file.display()
            ),
        }
    }

    let root = dir.canonicalize()?;
    let mut objects = Vec::new();
    for entry in sequence(&kustomization, "resources")? {
        let rel = entry.as_str().context("a resource that is not a path")?;
        let path = dir.join(rel);
        if path.is_dir() {
            objects.extend(kustomize_build(&path)?);
        } else {
            let real = path
                .canonicalize()
                .with_context(|| format!("{}: resource {rel}", file.display()))?;
            ensure!(
                real.starts_with(&root),
                "{}: resource {rel} is not in or below the kustomization (kustomize refuses it)",
                file.display()
            );
            objects.extend(load_documents(&real)?);
        }
    }
    let mut ids = BTreeSet::new();
    for object in &objects {
        ensure!(ids.insert(id(object)), "{} is defined twice", id(object));
    }
    for patch in sequence(&kustomization, "patches")? {
        apply_patch(&mut objects, patch)
            .with_context(|| format!("a patch in {}", file.display()))?;
    }
    Ok(objects)
}

fn sequence<'a>(
    map: &'a serde_yaml::Mapping,
    key: &str,
) -> anyhow::Result<&'a [serde_yaml::Value]> {
    match map.get(key) {
        None => Ok(&[]),
        Some(value) => Ok(value
            .as_sequence()
            .with_context(|| format!("`{key}` is not a list"))?),
    }
}

fn apply_patch(objects: &mut Vec<Value>, entry: &serde_yaml::Value) -> anyhow::Result<()> {
    let entry = entry
        .as_mapping()
        .context("a patch that is not a mapping")?;
    for key in entry.keys() {
        ensure!(
            matches!(key.as_str(), Some("patch" | "target")),
            "patch field {key:?} is not implemented (only inline `patch` and `target`)"
        );
    }
    let body = entry
        .get("patch")
        .and_then(serde_yaml::Value::as_str)
        .context("only inline `patch:` strings are implemented")?;
    let body: serde_yaml::Value = serde_yaml::from_str(body)?;
    match body {
        serde_yaml::Value::Sequence(operations) => {
            let target = entry
                .get("target")
                .context("a JSON 6902 patch needs a target")?
                .as_mapping()
                .context("target is not a mapping")?;
            let mut matched = 0;
            for object in objects.iter_mut() {
                if targets(target, &id(object))? {
                    for operation in &operations {
                        json6902_add(object, operation)?;
                    }
                    matched += 1;
                }
            }
            ensure!(matched > 0, "no object matches the target {target:?}");
        }
        serde_yaml::Value::Mapping(ref delete)
            if delete.get("$patch").and_then(serde_yaml::Value::as_str) == Some("delete") =>
        {
            ensure!(
                entry.get("target").is_none(),
                "`$patch: delete` with a target is not implemented"
            );
            let doomed = ObjectId::of(&serde_json::to_value(&body)?)?;
            let before = objects.len();
            objects.retain(|object| id(object) != doomed);
            ensure!(
                objects.len() + 1 == before,
                "`$patch: delete` of {doomed} matches no object"
            );
        }
        _ => bail!("only JSON 6902 operation lists and `$patch: delete` are implemented"),
    }
    Ok(())
}

/// Whether a patch `target` (group, version, kind, name, namespace) selects `id`.
fn targets(target: &serde_yaml::Mapping, id: &ObjectId) -> anyhow::Result<bool> {
    let mut selected = true;
    for (key, value) in target {
        let value = value
            .as_str()
            .context("a target field that is not a string")?;
        let actual = match key.as_str() {
            Some("group") => id.group(),
            Some("version") => id.version(),
            Some("kind") => id.kind.as_str(),
            Some("name") => id.name.as_str(),
            Some("namespace") => id.namespace.as_deref().unwrap_or(""),
            other => bail!("target field {other:?} is not implemented"),
        };
        selected &= actual == value;
    }
    Ok(selected)
}

/// Applies one JSON 6902 operation; only `add` is implemented.
fn json6902_add(object: &mut Value, operation: &serde_yaml::Value) -> anyhow::Result<()> {
    let operation: Value = serde_json::to_value(operation)?;
    let op = operation.get("op").and_then(Value::as_str);
    ensure!(
        op == Some("add"),
        "JSON 6902 op {op:?} is not implemented (only add)"
    );
    let path = operation
        .get("path")
        .and_then(Value::as_str)
        .context("an operation without a path")?;
    let value = operation
        .get("value")
        .context("an add without a value")?
        .clone();
    let (parent, last) = path
        .rsplit_once('/')
        .context("a path that is not a JSON pointer")?;
    let last = last.replace("~1", "/").replace("~0", "~");
    let parent = object
        .pointer_mut(parent)
        .with_context(|| format!("{parent} does not exist"))?;
    match parent {
        Value::Array(items) if last == "-" => items.push(value),
        Value::Array(items) => {
            let index: usize = last.parse().context("an array index")?;
            ensure!(index <= items.len(), "index {index} is out of bounds");
            items.insert(index, value);
        }
        Value::Object(fields) => {
            fields.insert(last, value);
        }
        _ => bail!("{path}: the parent is neither an array nor an object"),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// RBAC

/// Checks the rendered RBAC and returns what it grants the collector, one line per verb:
/// `<cluster|namespace> <group>/<resource>[<names>] <verb>` (group `core` for "").
///
/// Fails on a wildcard, a non-resource URL, a Secret grant in a ClusterRole, a binding to any
/// other subject than the collector's ServiceAccount, a binding to a role the manifests do not
/// hold, and a role no binding uses.
fn rbac_grants(objects: &[Value]) -> anyhow::Result<BTreeSet<String>> {
    // (namespace, name) -> rules; namespace None for ClusterRoles.
    let mut roles = BTreeMap::<(Option<String>, String), Vec<PolicyRule>>::new();
    for object in of_kind(objects, "ClusterRole") {
        let role: ClusterRole = typed(object);
        ensure!(
            role.aggregation_rule.is_none(),
            "{}: aggregation",
            id(object)
        );
        roles.insert((None, id(object).name), role.rules.unwrap_or_default());
    }
    for object in of_kind(objects, "Role") {
        let role: Role = typed(object);
        let id = id(object);
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
        let binding: ClusterRoleBinding = typed(object);
        ensure!(
            binding.role_ref.kind == "ClusterRole",
            "{}: binds a {}",
            id(object),
            binding.role_ref.kind
        );
        bindings.push((
            id(object),
            None,
            (None, binding.role_ref.name),
            binding.subjects,
        ));
    }
    for object in of_kind(objects, "RoleBinding") {
        let binding: RoleBinding = typed(object);
        let id = id(object);
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

/// Expands `"<scope> <group>/<resource> <verb>,<verb>"` lines into [`rbac_grants`] lines.
fn grants(lines: &[&str]) -> BTreeSet<String> {
    lines
        .iter()
        .flat_map(|line| {
            let (what, verbs) = line.rsplit_once(' ').unwrap();
            verbs.split(',').map(move |verb| format!("{what} {verb}"))
        })
        .collect()
}

/// What the collector needs to read Karmada members: the only grants beside Karmada.
const READ_GRANTS: &[&str] = &[
    "cluster cluster.karmada.io/clusters get,list,watch",
    "karmada-cluster core/secrets get,list,watch",
];

/// What writing status adds: the status subresource, Events, the leader-election Lease.
const WRITE_GRANTS: &[&str] = &[
    "cluster cluster.karmada.io/clusters/status update,patch",
    "default events.k8s.io/events create,patch",
    "tether-system coordination.k8s.io/leases create",
    "tether-system coordination.k8s.io/leases[tether-collector] get,update,patch",
];

fn expected_grants(write_status: bool) -> BTreeSet<String> {
    let mut expected = grants(READ_GRANTS);
    if write_status {
        expected.extend(grants(WRITE_GRANTS));
    }
    expected
}

fn assert_rbac(objects: &[Value], write_status: bool, what: &str) {
    let actual = rbac_grants(objects).unwrap_or_else(|err| panic!("{what}: {err:#}"));
    let expected = expected_grants(write_status);
    let extra: Vec<_> = actual.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&actual).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{what}: RBAC grants more than expected: {extra:#?}\nand lacks: {missing:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The Deployment and the Service

fn collector_container(deployment: &Deployment) -> &Container {
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod spec");
    assert_eq!(pod.containers.len(), 1, "one container");
    &pod.containers[0]
}

/// Checks the collector's Deployment and Service in `objects`, and returns its parsed flags.
fn assert_collector_workload(objects: &[Value], what: &str) -> Args {
    let deployments: Vec<_> = of_kind(objects, "Deployment").collect();
    assert_eq!(deployments.len(), 1, "{what}: one Deployment");
    let deployment_id = id(deployments[0]);
    let deployment: Deployment = typed(deployments[0]);
    let template = &deployment.spec.as_ref().unwrap().template;
    let pod = template.spec.as_ref().unwrap();
    let container = collector_container(&deployment);

    // The flags are the collector's real flags.
    let argv =
        std::iter::once("collector".to_owned()).chain(container.args.clone().unwrap_or_default());
    let args = Args::try_parse_from(argv)
        .unwrap_or_else(|err| panic!("{what}: the collector refuses its args: {err}"));
    assert!(
        container.command.is_none(),
        "{what}: the image's entrypoint runs"
    );
    assert_eq!(args.members_from, MembersFrom::Karmada, "{what}");
    assert_eq!(args.log_format, LogFormat::Json, "{what}");
    assert!(
        args.kubeconfig.is_none(),
        "{what}: in-cluster, no kubeconfig"
    );
    assert_eq!(
        args.control_plane_token_file,
        Path::new(PROJECTED_TOKEN),
        "{what}: the collector reads the projected token kubelet mounts"
    );

    // The ServiceAccount and its projected token.
    assert_eq!(pod.automount_service_account_token, Some(true), "{what}");
    assert_eq!(
        (
            deployment_id.namespace.as_deref(),
            pod.service_account_name.as_deref()
        ),
        (Some(COLLECTOR_SA.0), Some(COLLECTOR_SA.1)),
        "{what}: runs as the collector's ServiceAccount"
    );
    assert!(
        of_kind(objects, "ServiceAccount")
            .any(|sa| id(sa).namespace.as_deref() == Some(COLLECTOR_SA.0)
                && id(sa).name == COLLECTOR_SA.1),
        "{what}: the ServiceAccount is in the manifests"
    );

    // Non-root, read-only, no privileges.
    let pod_security = pod.security_context.clone().unwrap_or_default();
    let security = container.security_context.clone().unwrap_or_default();
    assert_eq!(
        security.run_as_non_root.or(pod_security.run_as_non_root),
        Some(true),
        "{what}"
    );
    assert_eq!(
        security.run_as_user.or(pod_security.run_as_user),
        Some(65532),
        "{what}"
    );
    assert_eq!(security.read_only_root_filesystem, Some(true), "{what}");
    assert_eq!(security.allow_privilege_escalation, Some(false), "{what}");
    assert!(!security.privileged.unwrap_or(false), "{what}");
    assert_eq!(
        security.capabilities.as_ref().and_then(|c| c.drop.clone()),
        Some(vec!["ALL".to_owned()]),
        "{what}"
    );
    assert!(
        security
            .capabilities
            .as_ref()
            .and_then(|c| c.add.as_ref())
            .is_none(),
        "{what}: no added capability"
    );
    let seccomp = security
        .seccomp_profile
        .or(pod_security.seccomp_profile)
        .map(|p| p.type_);
    assert_eq!(seccomp.as_deref(), Some("RuntimeDefault"), "{what}");
    assert!(
        pod.host_network.is_none() && pod.host_pid.is_none(),
        "{what}"
    );

    // Resources.
    let resources = container.resources.clone().unwrap_or_default();
    let quantity = |map: &Option<BTreeMap<String, Quantity>>, key: &str| {
        map.as_ref().and_then(|m| m.get(key)).map(|q| q.0.clone())
    };
    assert_eq!(quantity(&resources.requests, "cpu").as_deref(), Some("50m"));
    assert_eq!(
        quantity(&resources.requests, "memory").as_deref(),
        Some("64Mi")
    );
    assert_eq!(
        quantity(&resources.limits, "memory").as_deref(),
        Some("512Mi")
    );

    // The replica's identity and the Lease's namespace (the pod's) from the downward API.
    let field = |name: &str| {
        container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.clone())
    };
    assert_eq!(
        field("POD_NAME").as_deref(),
        Some("metadata.name"),
        "{what}"
    );
    assert_eq!(
        field("POD_NAMESPACE").as_deref(),
        Some("metadata.namespace"),
        "{what}"
    );

    // The HTTP port is the one the collector listens on, and the probes use it.
    let http = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("http"))
        .unwrap_or_else(|| panic!("{what}: a port named http"));
    assert_eq!(
        u16::try_from(http.container_port).ok(),
        Some(args.listen.port()),
        "{what}: the container port is --listen's"
    );
    let probe = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .unwrap_or_else(|| panic!("{what}: an HTTP probe"));
        (get.path.clone(), get.port.clone())
    };
    let http_port = IntOrString::String("http".to_owned());
    assert_eq!(
        probe(&container.liveness_probe),
        (Some("/healthz".to_owned()), http_port.clone()),
        "{what}"
    );
    assert_eq!(
        probe(&container.readiness_probe),
        (Some("/readyz".to_owned()), http_port.clone()),
        "{what}"
    );

    // The Service selects these pods and exposes the port.
    let services: Vec<_> = of_kind(objects, "Service").collect();
    assert_eq!(services.len(), 1, "{what}: one Service");
    assert_eq!(id(services[0]).namespace, deployment_id.namespace, "{what}");
    let service: Service = typed(services[0]);
    let spec = service.spec.unwrap();
    let labels = template.metadata.as_ref().unwrap().labels.clone().unwrap();
    let selector = spec.selector.unwrap();
    assert!(
        !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
        "{what}: the Service selects the collector's pods"
    );
    let port = spec
        .ports
        .unwrap()
        .into_iter()
        .find(|p| p.name.as_deref() == Some("http"))
        .unwrap_or_else(|| panic!("{what}: a Service port named http"));
    assert_eq!(
        (port.port, port.target_port),
        (8080, Some(http_port)),
        "{what}"
    );
    args
}

// ---------------------------------------------------------------------------------------------
// The apiserver

/// Namespaces the objects use but do not define.
fn prerequisite_namespaces(objects: &[Value]) -> BTreeSet<String> {
    let defined: BTreeSet<_> = of_kind(objects, "Namespace").map(|n| id(n).name).collect();
    objects
        .iter()
        .filter_map(|o| id(o).namespace)
        .filter(|ns| !defined.contains(ns))
        .collect()
}

/// Sends every object to the control plane: Namespaces (and `prerequisites`, namespaces that
/// exist before the install) are applied for real, everything else as a server-side apply
/// dry-run with strict field validation. Returns what was accepted; fails listing every
/// rejected object.
async fn apply(
    client: &Client,
    objects: &[Value],
    prerequisites: &[&str],
) -> anyhow::Result<Vec<ObjectId>> {
    let expected: BTreeSet<String> = prerequisites.iter().map(|&ns| ns.to_owned()).collect();
    ensure!(
        prerequisite_namespaces(objects) == expected,
        "the manifests use namespaces they do not create: {:?}, expected {expected:?}",
        prerequisite_namespaces(objects)
    );
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    for ns in prerequisites {
        let namespace = serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns },
        });
        namespaces
            .patch(ns, &PatchParams::apply(MANAGER), &Patch::Apply(&namespace))
            .await
            .with_context(|| format!("creating the prerequisite namespace {ns}"))?;
    }

    let discovery = Discovery::new(client.clone()).run().await?;
    let mut accepted = Vec::new();
    let mut rejected = Vec::new();
    // Namespaces first, for real; then the rest as dry-runs.
    let (first, rest): (Vec<&Value>, Vec<&Value>) = objects
        .iter()
        .partition(|o| id(o).api_version == "v1" && id(o).kind == "Namespace");
    for (object, dry_run) in first
        .into_iter()
        .map(|o| (o, false))
        .chain(rest.into_iter().map(|o| (o, true)))
    {
        let id = id(object);
        let type_meta = TypeMeta {
            api_version: id.api_version.clone(),
            kind: id.kind.clone(),
        };
        let Some((resource, capabilities)) = discovery.resolve_typemeta(&type_meta) else {
            rejected.push(format!("{id}: the apiserver does not serve this kind"));
            continue;
        };
        let api: Api<DynamicObject> = match (&capabilities.scope, &id.namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
            (Scope::Cluster, None) => Api::all_with(client.clone(), &resource),
            (scope, ns) => {
                rejected.push(format!("{id}: namespace {ns:?} for a {scope:?} kind"));
                continue;
            }
        };
        let mut params = PatchParams::apply(MANAGER).validation_strict();
        if dry_run {
            params = params.dry_run();
        }
        match api.patch(&id.name, &params, &Patch::Apply(object)).await {
            Ok(answer) if answer.metadata.name.as_deref() == Some(id.name.as_str()) => {
                accepted.push(id);
            }
            Ok(answer) => rejected.push(format!("{id}: answered with {:?}", answer.metadata)),
            Err(err) => rejected.push(format!("{id}: {err}")),
        }
    }
    ensure!(
        rejected.is_empty(),
        "the apiserver rejected:\n  {}",
        rejected.join("\n  ")
    );
    Ok(accepted)
}

/// Applies the RBAC objects and the ServiceAccount for real.
async fn apply_rbac_for_real(client: &Client, objects: &[Value]) -> anyhow::Result<()> {
    let discovery = Discovery::new(client.clone()).run().await?;
    for object in objects.iter().filter(|o| {
        let id = id(o);
        id.group() == "rbac.authorization.k8s.io" || id.kind == "ServiceAccount"
    }) {
        let id = id(object);
        let type_meta = TypeMeta {
            api_version: id.api_version.clone(),
            kind: id.kind.clone(),
        };
        let (resource, _) = discovery
            .resolve_typemeta(&type_meta)
            .with_context(|| format!("{id}: not served"))?;
        let api: Api<DynamicObject> = match &id.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            &id.name,
            &PatchParams::apply(MANAGER),
            &Patch::Apply(object),
        )
        .await
        .with_context(|| format!("applying {id}"))?;
    }
    Ok(())
}

/// A request by the collector's ServiceAccount: (namespace, group, resource, subresource,
/// name, verb).
type Request = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// Whether the apiserver's authorizer allows `request` to the collector's ServiceAccount.
async fn allowed(client: &Client, request: Request) -> anyhow::Result<bool> {
    let (namespace, group, resource, subresource, name, verb) = request;
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let (sa_ns, sa) = COLLECTOR_SA;
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{sa_ns}:{sa}")),
            groups: Some(vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{sa_ns}"),
                "system:authenticated".to_owned(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                namespace: some(namespace),
                group: Some(group.to_owned()),
                resource: some(resource),
                subresource: some(subresource),
                name: some(name),
                verb: some(verb),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// What the collector does; all must be allowed.
const READS: &[Request] = &[
    ("", "cluster.karmada.io", "clusters", "", "", "list"),
    ("", "cluster.karmada.io", "clusters", "", "", "watch"),
    (KARMADA_SECRETS, "", "secrets", "", "", "list"),
    (KARMADA_SECRETS, "", "secrets", "", "", "watch"),
    (KARMADA_SECRETS, "", "secrets", "", "member1", "get"),
];
const WRITES: &[Request] = &[
    (
        "",
        "cluster.karmada.io",
        "clusters",
        "status",
        "member1",
        "patch",
    ),
    ("default", "events.k8s.io", "events", "", "", "create"),
    ("default", "events.k8s.io", "events", "", "e", "patch"),
    (
        "tether-system",
        "coordination.k8s.io",
        "leases",
        "",
        "",
        "create",
    ),
    (
        "tether-system",
        "coordination.k8s.io",
        "leases",
        "",
        "tether-collector",
        "patch",
    ),
    (
        "tether-system",
        "coordination.k8s.io",
        "leases",
        "",
        "tether-collector",
        "get",
    ),
];
/// What the collector must never be able to do.
const FORBIDDEN: &[Request] = &[
    ("kube-system", "events.k8s.io", "events", "", "", "create"),
    ("default", "", "events", "", "", "create"),
    ("", "", "secrets", "", "", "list"),
    ("kube-system", "", "secrets", "", "", "list"),
    ("tether-system", "", "secrets", "", "", "get"),
    (KARMADA_SECRETS, "", "secrets", "", "member1", "update"),
    (KARMADA_SECRETS, "", "secrets", "", "", "create"),
    ("", "cluster.karmada.io", "clusters", "", "member1", "patch"),
    (
        "",
        "cluster.karmada.io",
        "clusters",
        "",
        "member1",
        "delete",
    ),
    ("", "cluster.karmada.io", "clusters", "", "", "create"),
    (
        "tether-system",
        "coordination.k8s.io",
        "leases",
        "",
        "someone-else",
        "patch",
    ),
    (
        "kube-system",
        "coordination.k8s.io",
        "leases",
        "",
        "",
        "create",
    ),
    (
        "",
        "rbac.authorization.k8s.io",
        "clusterroles",
        "",
        "",
        "create",
    ),
];

/// Applies the RBAC for real and asks the apiserver's authorizer what the collector may do.
async fn assert_authorized(client: &Client, objects: &[Value], write_status: bool) {
    apply_rbac_for_real(client, objects).await.unwrap();
    let must_allow: Vec<Request> = READS
        .iter()
        .chain(if write_status { WRITES } else { &[] })
        .copied()
        .collect();
    let mut must_deny: Vec<Request> = FORBIDDEN.to_vec();
    if !write_status {
        must_deny.extend_from_slice(WRITES);
    }
    // The RBAC authorizer reads roles through an informer: wait until the grants are seen.
    let deadline = Instant::now() + Duration::from_secs(20);
    for request in &must_allow {
        while !allowed(client, *request).await.unwrap() {
            assert!(
                Instant::now() < deadline,
                "the collector may not {request:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for request in &must_deny {
        assert!(
            !allowed(client, *request).await.unwrap(),
            "the collector may {request:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Tests: kustomize

#[test]
fn kustomize_rbac_is_least_privilege() {
    let base = kustomize_build(&kustomize_dir("base")).unwrap();
    assert_rbac(&base, true, "base");
    let beside = kustomize_build(&kustomize_dir("overlays/beside-karmada")).unwrap();
    assert_rbac(&beside, false, "beside-karmada");
}

#[test]
fn kustomize_deployments_match_the_collector_cli() {
    let base = kustomize_build(&kustomize_dir("base")).unwrap();
    let args = assert_collector_workload(&base, "base");
    assert!(args.write_status, "the base writes status");
    assert!(
        of_kind(&base, "CustomResourceDefinition").next().is_none(),
        "the CRD is applied from deploy/crds"
    );

    let beside = kustomize_build(&kustomize_dir("overlays/beside-karmada")).unwrap();
    let args = assert_collector_workload(&beside, "beside-karmada");
    assert!(!args.write_status, "beside Karmada, Karmada writes status");
    assert!(
        of_kind(&beside, "CustomResourceDefinition")
            .next()
            .is_none(),
        "Karmada ships the CRD"
    );
}

#[test]
fn servicemonitor_component_scrapes_the_service() {
    let dir = kustomize_dir("components/servicemonitor");
    let monitors = load_documents(&dir.join("servicemonitor.yaml")).unwrap();
    assert_eq!(monitors.len(), 1);
    let monitor = &monitors[0];
    let base = kustomize_build(&kustomize_dir("base")).unwrap();
    let service = of_kind(&base, "Service").next().unwrap();
    assert_eq!(id(monitor).namespace, id(service).namespace);
    let selector = monitor
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .unwrap();
    let labels = service
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .unwrap();
    assert!(selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let endpoint = monitor.pointer("/spec/endpoints/0").unwrap();
    assert_eq!(endpoint["port"], "http");
    assert_eq!(endpoint["path"], "/metrics");
    let kustomization = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    assert!(
        kustomization.contains("kind: Component") && kustomization.contains("servicemonitor.yaml")
    );
}

#[test]
fn minimal_renderer_refuses_what_it_does_not_implement() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "namespace: elsewhere\nresources: []\n",
    )
    .unwrap();
    let err = kustomize_build(dir.path()).unwrap_err();
    assert!(format!("{err:#}").contains("not implemented"), "{err:#}");

    // A file above the kustomization is refused, as kustomize's load restrictor does.
    let inner = dir.path().join("inner");
    std::fs::create_dir(&inner).unwrap();
    std::fs::write(
        dir.path().join("above.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n",
    )
    .unwrap();
    std::fs::write(
        inner.join("kustomization.yaml"),
        "resources:\n  - ../above.yaml\n",
    )
    .unwrap();
    let err = kustomize_build(&inner).unwrap_err();
    assert!(format!("{err:#}").contains("not in or below"), "{err:#}");
}

#[tokio::test]
async fn kustomize_base_is_accepted_by_a_real_apiserver() {
    let env = Environment::with_members(0).await.unwrap();
    let client = env.control_plane().admin_client().unwrap();
    // The documented install: the CRD from deploy/crds, then the base.
    let mut objects = load_documents(&generated_crd_path()).unwrap();
    objects.extend(kustomize_build(&kustomize_dir("base")).unwrap());
    let accepted = apply(&client, &objects, &[KARMADA_SECRETS, EVENTS_NAMESPACE])
        .await
        .unwrap();
    assert_eq!(accepted.len(), objects.len());
    eprintln!(
        "accepted: {}",
        accepted
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    );
    assert_authorized(&client, &objects, true).await;
}

#[tokio::test]
async fn kustomize_beside_karmada_is_accepted_by_a_real_apiserver() {
    let env = Environment::with_members(0).await.unwrap();
    let client = env.control_plane().admin_client().unwrap();
    let objects = kustomize_build(&kustomize_dir("overlays/beside-karmada")).unwrap();
    let accepted = apply(&client, &objects, &[KARMADA_SECRETS]).await.unwrap();
    assert_eq!(accepted.len(), objects.len());
    assert_authorized(&client, &objects, false).await;
}

/// Runs `kubectl kustomize` on a kustomization.
fn kubectl_kustomize(dir: &Path) -> anyhow::Result<Vec<Value>> {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_owned());
    let output = Command::new(&kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .with_context(|| format!("running {kubectl} (set KUBECTL or put kubectl on PATH)"))?;
    ensure!(
        output.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    parse_documents(&String::from_utf8(output.stdout)?, "kubectl kustomize")
}

fn sorted(mut objects: Vec<Value>) -> Vec<Value> {
    objects.sort_by_key(id);
    objects
}

#[test]
#[ignore = "needs kubectl (for `kubectl kustomize`)"]
fn minimal_renderer_agrees_with_kubectl_kustomize() {
    for rel in ["base", "overlays/beside-karmada"] {
        let dir = kustomize_dir(rel);
        let ours = sorted(kustomize_build(&dir).unwrap());
        let theirs = sorted(kubectl_kustomize(&dir).unwrap());
        assert_eq!(
            ours.iter().map(id).collect::<Vec<_>>(),
            theirs.iter().map(id).collect::<Vec<_>>(),
            "{rel}: the same objects"
        );
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(a, b, "{rel}: {} differs", id(a));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tests: Helm

fn chart_dir() -> PathBuf {
    repo_root().join("deploy/helm/tether")
}

#[test]
fn helm_chart_crd_is_the_generated_one() {
    let generated = std::fs::read_to_string(generated_crd_path()).unwrap();
    let copy = std::fs::read_to_string(chart_dir().join("files/cluster.karmada.io_clusters.yaml"))
        .unwrap();
    assert!(
        copy == generated,
        "deploy/helm/tether/files/ holds a stale CRD: \
         cp deploy/crds/cluster.karmada.io_clusters.yaml deploy/helm/tether/files/"
    );
}

/// Renders the chart with `helm template` as release `tether` in `tether-system`.
fn helm_template(kube_version: &str, values: Option<&Path>) -> anyhow::Result<Vec<Value>> {
    let helm = std::env::var("HELM").unwrap_or_else(|_| "helm".to_owned());
    let mut command = Command::new(&helm);
    command.args(["template", "tether"]).arg(chart_dir()).args([
        "--namespace",
        COLLECTOR_SA.0,
        "--kube-version",
        kube_version,
    ]);
    if let Some(values) = values {
        command.arg("--values").arg(values);
    }
    let output = command
        .output()
        .with_context(|| format!("running {helm} (set HELM or put helm on PATH)"))?;
    ensure!(
        output.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    parse_documents(&String::from_utf8(output.stdout)?, "helm template")
}

#[tokio::test]
#[ignore = "needs a helm binary"]
async fn helm_chart_renders_and_is_accepted_by_a_real_apiserver() {
    let env = Environment::with_members(0).await.unwrap();
    let client = env.control_plane().admin_client().unwrap();
    let version = client.apiserver_version().await.unwrap().git_version;
    let version = version.trim_start_matches('v');

    // Defaults: the CRD, status writing; `helm install --create-namespace` makes the namespace.
    let objects = helm_template(version, None).unwrap();
    let crds: Vec<_> = of_kind(&objects, "CustomResourceDefinition").collect();
    assert_eq!(crds.len(), 1, "installCRDs=true renders the CRD");
    let mut crd = crds[0].clone();
    let annotations = crd
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
        .unwrap();
    assert_eq!(
        annotations.remove("helm.sh/resource-policy"),
        Some("keep".into()),
        "the CRD outlives the release"
    );
    if annotations.is_empty() {
        crd["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
    }
    assert_eq!(
        crd,
        load_documents(&generated_crd_path()).unwrap()[0],
        "the chart's CRD is the generated one"
    );
    assert_rbac(&objects, true, "helm defaults");
    assert!(assert_collector_workload(&objects, "helm defaults").write_status);
    apply(
        &client,
        &objects,
        &[KARMADA_SECRETS, COLLECTOR_SA.0, EVENTS_NAMESPACE],
    )
    .await
    .unwrap();
    assert_authorized(&client, &objects, true).await;

    // Beside Karmada, as the kustomize overlay.
    let values = chart_dir().join("ci/beside-karmada-values.yaml");
    let beside = helm_template(version, Some(&values)).unwrap();
    assert!(
        of_kind(&beside, "CustomResourceDefinition")
            .next()
            .is_none()
    );
    assert_rbac(&beside, false, "helm beside Karmada");
    assert!(!assert_collector_workload(&beside, "helm beside Karmada").write_status);
    apply(&client, &beside, &[KARMADA_SECRETS, COLLECTOR_SA.0])
        .await
        .unwrap();

    // The chart and the kustomize base make the same kinds of objects in the same places.
    let places = |objects: &[Value]| {
        objects
            .iter()
            .map(|o| (id(o).kind, id(o).namespace))
            .collect::<BTreeSet<_>>()
    };
    let mut base = load_documents(&generated_crd_path()).unwrap();
    base.extend(kustomize_build(&kustomize_dir("base")).unwrap());
    base.retain(|o| id(o).kind != "Namespace");
    assert_eq!(places(&objects), places(&base));
}

// ---------------------------------------------------------------------------------------------
// The collector running as the base's ServiceAccount

const HOUR: Duration = Duration::from_secs(3600);
/// Bound for the collector's start-up and for each state it must reach.
const LIMIT: Duration = Duration::from_secs(30);

/// A Karmada control plane with member1 registered, the base's namespace, ServiceAccount and
/// the RBAC among `objects` applied for real, and the collector running as that ServiceAccount
/// with the Deployment's own arguments (plus what the pod would get from its environment).
async fn collector_as_the_base_service_account(
    env: &Environment,
    objects: &[Value],
) -> (karmada_plane::KarmadaPlane, RunningCollector) {
    let (cp, member) = (env.control_plane(), env.cluster(1));
    let admin = cp.admin_client().unwrap();
    // What a user has before `kubectl apply -k`: the CRD (Karmada's or deploy/crds) and
    // Karmada's Secret namespace; then a member registered the Karmada way.
    let plane = karmada_plane::KarmadaPlane::install(cp).await.unwrap();
    let agents = member.create_namespace("agents").await.unwrap();
    member
        .create_service_account(&agents, "agent-a")
        .await
        .unwrap();
    let member_token = member.mint_token(&agents, "agent-a", HOUR).await.unwrap();
    plane.register(member, &member_token).await.unwrap();

    for namespace in of_kind(objects, "Namespace") {
        admin_apply_json(&admin, namespace.clone()).await;
    }
    apply_rbac_for_real(&admin, objects).await.unwrap();
    let (sa_namespace, sa_name) = COLLECTOR_SA;
    let own_token = cp.mint_token(sa_namespace, sa_name, HOUR).await.unwrap();

    let deployment: Deployment = typed(of_kind(objects, "Deployment").next().unwrap());
    let mut args = collector_container(&deployment).args.clone().unwrap();
    args.extend(control_plane_args(cp, &own_token).unwrap());
    args.extend([
        "--leader-election-identity".to_owned(),
        "tether-collector-0".to_owned(),
        "--probe-period".to_owned(),
        "1".to_owned(),
    ]);
    let collector = RunningCollector::start(&args).await.unwrap();
    (plane, collector)
}

/// The access reviews above check the requests we listed; this runs the collector with the
/// base's RBAC and nothing else, with the Deployment's own arguments, so a request we did not
/// think of fails here.
#[tokio::test]
async fn the_collector_does_its_job_with_exactly_the_base_rbac() {
    let env = Environment::with_members(1).await.unwrap();
    let (cp, member) = (env.control_plane(), env.cluster(1));
    let admin = cp.admin_client().unwrap();
    let objects = kustomize_build(&kustomize_dir("base")).unwrap();
    let (plane, mut collector) = collector_as_the_base_service_account(&env, &objects).await;
    let sa_namespace = COLLECTOR_SA.0;

    // Status written: Clusters listed, the Secret read, the Lease taken, the status patched.
    plane
        .wait_condition("member1", "Ready", "True", "MemberReady", LIMIT)
        .await
        .unwrap();
    let lease = Api::<Lease>::namespaced(admin.clone(), sa_namespace)
        .get("tether-collector")
        .await
        .unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("tether-collector-0")
    );
    // And the transition recorded as an Event on the Cluster.
    let deadline = Instant::now() + LIMIT;
    loop {
        let events = Api::<Event>::namespaced(admin.clone(), EVENTS_NAMESPACE)
            .list(&ListParams::default())
            .await
            .unwrap();
        if events.iter().any(|e| {
            e.reason.as_deref() == Some("MemberReady")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("member1")
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no MemberReady Event for member1 in {EVENTS_NAMESPACE}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A Cluster whose Secret is in a namespace the base grants nothing in: said so, on it.
    admin_apply_json(
        &admin,
        serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "elsewhere" },
        }),
    )
    .await;
    admin_apply_json(
        &admin,
        serde_json::json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": { "name": "member2" },
            "spec": {
                "syncMode": "Push",
                "apiEndpoint": member.endpoint(),
                "secretRef": { "namespace": "elsewhere", "name": "member2" },
            },
        }),
    )
    .await;
    plane
        .wait_condition("member2", "Ready", "False", "SecretForbidden", LIMIT)
        .await
        .unwrap();
    assert_eq!(
        plane
            .condition("member2", "CredentialsValid")
            .await
            .unwrap(),
        Some(("Unknown".to_owned(), "SecretForbidden".to_owned()))
    );
    assert_eq!(
        plane.condition("member1", "Ready").await.unwrap(),
        Some(("True".to_owned(), "MemberReady".to_owned())),
        "member1 is unaffected"
    );
    collector.stop().await;
}

#[tokio::test]
async fn a_collector_that_may_not_list_clusters_is_not_ready_and_says_why() {
    let env = Environment::with_members(1).await.unwrap();
    let admin = env.control_plane().admin_client().unwrap();
    let objects = kustomize_build(&kustomize_dir("base")).unwrap();
    // The base without the binding that lets the collector read Clusters.
    let (without, binding): (Vec<Value>, Vec<Value>) = objects.iter().cloned().partition(|o| {
        let id = id(o);
        !(id.kind == "ClusterRoleBinding" && id.name == COLLECTOR_SA.1)
    });
    assert_eq!(binding.len(), 1, "the base binds its ClusterRole once");
    let (_plane, mut collector) = collector_as_the_base_service_account(&env, &without).await;

    let deadline = Instant::now() + LIMIT;
    loop {
        let (status, body) = collector.get("/readyz").await.unwrap();
        // "not listed yet" first, then the apiserver's refusal.
        if status == 503 && body.contains("Karmada Clusters") && body.contains("forbidden") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz is {status} ({body}) although the Clusters cannot be listed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listed = || collector.metric("tether_member_source_listed", r#"source="karmada""#);
    assert_eq!(listed().await.unwrap(), 0.0);

    // Granted: the watch's retry lists, and the collector is ready without a restart.
    apply_rbac_for_real(&admin, &binding).await.unwrap();
    let deadline = Instant::now() + 2 * LIMIT;
    while collector.get("/readyz").await.unwrap().0 != 200 {
        assert!(Instant::now() < deadline, "not ready after the grant");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(listed().await.unwrap(), 1.0);
    collector.stop().await;
}

/// Server-side applies one object (a Namespace or a cluster-scoped custom resource) as the
/// admin.
async fn admin_apply_json(client: &Client, object: Value) {
    let id = id(&object);
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (resource, _) = discovery
        .resolve_typemeta(&TypeMeta {
            api_version: id.api_version.clone(),
            kind: id.kind.clone(),
        })
        .unwrap();
    Api::<DynamicObject>::all_with(client.clone(), &resource)
        .patch(
            &id.name,
            &PatchParams::apply(MANAGER),
            &Patch::Apply(&object),
        )
        .await
        .unwrap();
}
