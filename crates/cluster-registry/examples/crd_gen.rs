//! Prints the Karmada `Cluster` CRD that `deploy/crds/cluster.karmada.io_clusters.yaml` holds.
//!
//! ```sh
//! cargo run -p cluster-registry --example crd_gen > deploy/crds/cluster.karmada.io_clusters.yaml
//! ```

fn main() -> Result<(), cluster_registry::Error> {
    print!("{}", cluster_registry::karmada::crd_yaml()?);
    Ok(())
}
