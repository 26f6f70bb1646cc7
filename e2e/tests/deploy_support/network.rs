//! The collector's NetworkPolicy as the manifests render it.

use e2e::manifest::{of_kind, typed};
use k8s_openapi::{
    api::{apps::v1::Deployment, networking::v1::NetworkPolicy},
    apimachinery::pkg::util::intstr::IntOrString,
};
use serde_json::Value;

use super::id;

/// One NetworkPolicy beside the collector's Deployment selects its pods and admits TCP to the
/// `http` port only, from the `monitoring` namespace only.
pub fn assert_network_policy(objects: &[Value], what: &str) {
    let deployment = of_kind(objects, "Deployment").next().unwrap();
    let policies: Vec<_> = of_kind(objects, "NetworkPolicy").collect();
    assert_eq!(policies.len(), 1, "{what}: one NetworkPolicy");
    assert_eq!(
        id(policies[0]).namespace,
        id(deployment).namespace,
        "{what}"
    );
    let policy: NetworkPolicy = typed(policies[0]).unwrap();
    let deployment: Deployment = typed(deployment).unwrap();
    let spec = policy.spec.unwrap();
    let template = deployment.spec.unwrap().template;
    let pod_labels = template.metadata.unwrap().labels.unwrap();
    let selector = spec.pod_selector.unwrap_or_default().match_labels;
    let selector = selector.unwrap_or_default();
    assert!(
        !selector.is_empty() && selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
        "{what}: the NetworkPolicy selects the collector's pods"
    );
    let types = spec.policy_types;
    assert_eq!(types, Some(vec!["Ingress".to_owned()]), "{what}");
    let ingress = spec.ingress.unwrap_or_default();
    assert_eq!(ingress.len(), 1, "{what}: one ingress rule");
    let ports: Vec<_> = ingress[0]
        .ports
        .iter()
        .flatten()
        .map(|p| (p.port.clone(), p.protocol.clone()))
        .collect();
    let http = (
        Some(IntOrString::String("http".to_owned())),
        Some("TCP".to_owned()),
    );
    assert_eq!(ports, [http], "{what}: only the HTTP port");
    let from = serde_json::to_value(&ingress[0].from).unwrap();
    assert_eq!(
        from,
        serde_json::json!([{"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": "monitoring"
        }}}]),
        "{what}: the HTTP port admits the monitoring namespace only"
    );
}
