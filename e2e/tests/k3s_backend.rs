//! The k3s (testcontainers) backend hands out the same `Cluster` handle as the loopback
//! apiservers. Needs `--features k3s` and a Docker engine that can pull `rancher/k3s`:
//! `cargo test -p e2e --features k3s -- --ignored`.
//!
//! The test is compiled in every build so that a default run lists it as ignored; run with
//! `--ignored` but without the feature, it fails and says why instead of passing.

#[tokio::test]
#[ignore = "needs a Docker engine that can pull rancher/k3s"]
async fn k3s_cluster_lists_its_namespaces() {
    #[cfg(feature = "k3s")]
    {
        use k8s_openapi::api::core::v1::Namespace;
        use kube::api::{Api, ListParams};
        use testkit::K3sCluster;

        let k3s = K3sCluster::start("k3s").await.unwrap();
        let namespaces = Api::<Namespace>::all(k3s.cluster().admin_client().unwrap())
            .list(&ListParams::default())
            .await
            .unwrap();
        assert!(
            namespaces
                .iter()
                .any(|n| n.metadata.name.as_deref() == Some("kube-system")),
            "k3s has kube-system"
        );
    }
    #[cfg(not(feature = "k3s"))]
    panic!("built without the k3s backend: run `cargo test -p e2e --features k3s -- --ignored`");
}
