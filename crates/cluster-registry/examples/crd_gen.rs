//! Prints a CRD that `deploy/crds/` holds: Karmada's `Cluster` by default, or SIG-Multicluster's
//! `ClusterProfile` with the argument `clusterprofile`.
//!
//! ```sh
//! cargo run -p tether-cluster-registry --example crd_gen > deploy/crds/cluster.karmada.io_clusters.yaml
//! cargo run -p tether-cluster-registry --example crd_gen -- clusterprofile > deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml
//! ```

fn main() -> Result<(), cluster_registry::Error> {
    let yaml = match std::env::args().nth(1).as_deref() {
        Some("clusterprofile") => cluster_registry::clusterprofile::crd_yaml()?,
        _ => cluster_registry::karmada::crd_yaml()?,
    };
    print!("{yaml}");
    Ok(())
}
