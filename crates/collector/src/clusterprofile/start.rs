//! Wires the publisher into the collector: the namespace from `--publish-clusterprofiles`, the
//! control plane's client, and the leader election it writes under.

use anyhow::Context as _;
use cluster_registry::Registry;
use futures::future::BoxFuture;

use super::{api::ProfilesApi, credential_marks::SecretMarks, publisher::ProfilePublisher};
use crate::{
    cli::Args,
    control_plane::{ControlPlane, Lease, lease_or_join},
    metrics::Metrics,
};

/// The publisher `args` ask for (`None` without `--publish-clusterprofiles`), the future that
/// writes (pending for ever when there is none), and the Lease: `lease` as given, or one joined
/// here when publishing needs leader election and nothing joined it yet.
///
/// # Errors
/// Publishing without a control plane; joining the election failing.
pub(crate) async fn start(
    args: &Args,
    control_plane: Option<&ControlPlane>,
    registry: &Registry,
    identity: &str,
    metrics: &Metrics,
    lease: Option<Lease>,
) -> anyhow::Result<(
    Option<ProfilePublisher>,
    BoxFuture<'static, ()>,
    Option<Lease>,
)> {
    let Some(namespace) = &args.publish_clusterprofiles else {
        return Ok((None, Box::pin(std::future::pending()), lease));
    };
    let control_plane = control_plane.context(
        "--publish-clusterprofiles writes to a control plane: give --kubeconfig or \
         --control-plane-url",
    )?;
    let lease = lease_or_join(lease, &control_plane.client, args, identity, metrics).await?;
    let leader = lease.as_ref().and_then(Lease::leader);
    let (publisher, writes) = ProfilePublisher::new(
        ProfilesApi::new(control_plane.client.clone(), namespace),
        SecretMarks::new(control_plane.client.clone()),
        namespace.clone(),
        registry.clone(),
        leader,
    );
    tracing::info!(namespace = %namespace, "publishing a ClusterProfile per member");
    Ok((Some(publisher), Box::pin(writes), lease))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;
    use cluster_registry::{DirectoryConfig, RegistryBuilder};

    #[tokio::test]
    async fn publishing_without_a_control_plane_is_refused_saying_what_to_give() {
        let args = Args::try_parse_from([
            "collector",
            "--members-from",
            "directory",
            "--members-dir",
            "/m",
            "--publish-clusterprofiles",
            "fleet",
        ])
        .unwrap();
        let (registry, _events, _driver) = RegistryBuilder::new()
            .directory(DirectoryConfig::new(std::path::PathBuf::from("/m")))
            .build();
        let refused = start(&args, None, &registry, "me", &Metrics::new(), None).await;
        let err = refused.err().unwrap().to_string();
        assert!(err.contains("--kubeconfig or --control-plane-url"), "{err}");

        let off = Args::try_parse_from([
            "collector",
            "--members-from",
            "directory",
            "--members-dir",
            "/m",
        ])
        .unwrap();
        let (publisher, _writes, lease) = start(&off, None, &registry, "me", &Metrics::new(), None)
            .await
            .unwrap();
        assert!(
            publisher.is_none() && lease.is_none(),
            "nothing without the flag"
        );
    }
}
