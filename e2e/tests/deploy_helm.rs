//! The Helm chart (`deploy/helm/tether`) against a real kube-apiserver, as the kustomize
//! manifests are in `deploy_kustomize.rs`. Rendering needs a `helm` binary (`HELM` or `helm`
//! on `PATH`): the test that renders is ignored by default and fails when run without one.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

mod deploy_support;

use std::collections::BTreeSet;

use deploy_support::{
    EVENTS_NAMESPACE, KARMADA_SECRETS, PROFILES_NAMESPACE, Writes, assert_authorized, assert_rbac,
    id, network::assert_network_policy, workload::assert_collector_workload,
};
use e2e::{
    helm::helm_template,
    kustomize,
    manifest::{chart_dir, generated_crd_path, kustomize_dir, load_documents, of_kind},
    manifest_apply::apply,
    rbac_grants::COLLECTOR_SA,
};
use serde_json::Value;
use testkit::Environment;

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
    assert_network_policy(&objects, "helm defaults");
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

    // Beside Karmada, publishing ClusterProfiles: their Role in that namespace, and the Lease
    // although no status is written.
    let values = chart_dir().join("ci/publish-clusterprofiles-values.yaml");
    let publishing = helm_template(version, Some(&values)).unwrap();
    let writes = Writes {
        status: false,
        profiles: true,
    };
    assert_rbac(&publishing, writes, "helm publishing ClusterProfiles");
    let args = assert_collector_workload(&publishing, "helm publishing ClusterProfiles");
    assert_eq!(
        args.publish_clusterprofiles.as_deref(),
        Some(PROFILES_NAMESPACE)
    );
    apply(
        &client,
        &publishing,
        &[KARMADA_SECRETS, COLLECTOR_SA.0, PROFILES_NAMESPACE],
    )
    .await
    .unwrap();
    // Not a namespace name: refused at render time.
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), "publishClusterProfiles: Not_A_Namespace\n").unwrap();
    let err = helm_template(version, Some(bad.path())).unwrap_err();
    assert!(
        format!("{err:#}").contains("must be a namespace name"),
        "{err:#}"
    );

    // The chart and the kustomize base make the same kinds of objects in the same places.
    let places = |objects: &[Value]| {
        objects
            .iter()
            .map(|o| (id(o).kind, id(o).namespace))
            .collect::<BTreeSet<_>>()
    };
    let mut base = load_documents(&generated_crd_path()).unwrap();
    base.extend(kustomize::build(&kustomize_dir("base")).unwrap());
    base.retain(|o| id(o).kind != "Namespace");
    assert_eq!(places(&objects), places(&base));
}
