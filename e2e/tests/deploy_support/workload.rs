//! The collector's Deployment and Service as the manifests render them.

use std::{collections::BTreeMap, path::Path};

use clap::Parser as _;
use collector::cli::{Args, LogFormat, MembersFrom};
use e2e::{
    manifest::{of_kind, typed},
    rbac_grants::COLLECTOR_SA,
};
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{Container, Service},
    },
    apimachinery::pkg::{api::resource::Quantity, util::intstr::IntOrString},
};
use serde_json::Value;

use super::id;

/// Where kubelet mounts the pod's projected ServiceAccount token.
const PROJECTED_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// The collector's flags as `container` gives them, parsed by its real command line.
pub fn container_args(container: &Container, what: &str) -> Args {
    let argv =
        std::iter::once("collector".to_owned()).chain(container.args.clone().unwrap_or_default());
    Args::try_parse_from(argv)
        .unwrap_or_else(|err| panic!("{what}: the collector refuses its args: {err}"))
}

/// The collector's flags as the one Deployment in `objects` gives them.
pub fn collector_args(objects: &[Value], what: &str) -> Args {
    let deployment: Deployment = typed(of_kind(objects, "Deployment").next().unwrap()).unwrap();
    container_args(collector_container(&deployment), what)
}

/// The collector's container, the pod's only one.
pub fn collector_container(deployment: &Deployment) -> &Container {
    let pod = (deployment.spec.as_ref())
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod spec");
    assert_eq!(pod.containers.len(), 1, "one container");
    &pod.containers[0]
}

/// Checks the collector's Deployment and Service in `objects`, and returns its parsed flags.
pub fn assert_collector_workload(objects: &[Value], what: &str) -> Args {
    let deployments: Vec<_> = of_kind(objects, "Deployment").collect();
    assert_eq!(deployments.len(), 1, "{what}: one Deployment");
    let deployment_id = id(deployments[0]);
    let deployment: Deployment = typed(deployments[0]).unwrap();
    let template = &deployment.spec.as_ref().unwrap().template;
    let pod = template.spec.as_ref().unwrap();
    let container = collector_container(&deployment);

    // The flags are the collector's real flags.
    let args = container_args(container, what);
    let entrypoint = container.command.is_none();
    assert!(entrypoint, "{what}: the image's entrypoint runs");
    assert_eq!(args.sources.members_from, MembersFrom::Karmada, "{what}");
    assert_eq!(args.log_format, LogFormat::Json, "{what}");
    let in_cluster = args.kubeconfig.is_none();
    assert!(in_cluster, "{what}: in-cluster, no kubeconfig");
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
    for (kind, map, key, want) in [
        ("requests", &resources.requests, "cpu", "50m"),
        ("requests", &resources.requests, "memory", "64Mi"),
        ("limits", &resources.limits, "memory", "512Mi"),
    ] {
        assert_eq!(quantity(map, key).as_deref(), Some(want), "{what}: {kind}");
    }

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
    for (name, path) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        assert_eq!(field(name).as_deref(), Some(path), "{what}: {name}");
    }

    // The HTTP port is the one the collector listens on; the probes use the probe port.
    let listens = [
        ("http", args.listen.port(), "--listen"),
        ("probes", args.probe_listen.port(), "--probe-listen"),
    ];
    for (name, want, flag) in listens {
        let port = (container.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("{what}: a port named {name}"));
        let port = u16::try_from(port.container_port).ok();
        assert_eq!(port, Some(want), "{what}: the {name} port is {flag}'s");
    }
    let probe = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .unwrap_or_else(|| panic!("{what}: an HTTP probe"));
        (get.path.clone(), get.port.clone())
    };
    let http_port = IntOrString::String("http".to_owned());
    let probes_port = IntOrString::String("probes".to_owned());
    for (kind, path) in [
        (&container.liveness_probe, "/healthz"),
        (&container.readiness_probe, "/readyz"),
    ] {
        let want = (Some(path.to_owned()), probes_port.clone());
        assert_eq!(probe(kind), want, "{what}: {path}");
    }

    // The Service selects these pods and exposes the port.
    let services: Vec<_> = of_kind(objects, "Service").collect();
    assert_eq!(services.len(), 1, "{what}: one Service");
    assert_eq!(id(services[0]).namespace, deployment_id.namespace, "{what}");
    let service: Service = typed(services[0]).unwrap();
    let spec = service.spec.unwrap();
    let labels = template.metadata.as_ref().unwrap().labels.clone().unwrap();
    let selector = spec.selector.unwrap();
    assert!(
        !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
        "{what}: the Service selects the collector's pods"
    );
    let ports = spec.ports.unwrap_or_default();
    let http_service_port = ports.iter().find(|p| p.name.as_deref() == Some("http"));
    assert_eq!(
        http_service_port.map(|p| (p.port, p.target_port.clone())),
        Some((8080, Some(http_port))),
        "{what}: a Service port named http, 8080 to the container's"
    );
    args
}
