//! Wires the publisher into the collector: the namespace from `--publish-clusterprofiles`, the
//! control plane's client, and the leader election it writes under.

use anyhow::Context as _;
use cluster_registry::Registry;
use futures::future::BoxFuture;

use super::{api::ProfilesApi, credential_marks::SecretMarks, publisher::ProfilePublisher};
use crate::control_plane::{Lease, Startup};

/// The publisher `args` ask for (`None` without `--publish-clusterprofiles`), the future that
/// writes (pending for ever when there is none), and the Lease: `lease` as given, or one joined
/// here when publishing needs leader election and nothing joined it yet.
///
/// # Errors
/// Publishing without a control plane; joining the election failing.
pub(crate) async fn start(
    startup: Startup<'_>,
    registry: &Registry,
    lease: Option<Lease>,
) -> anyhow::Result<(
    Option<ProfilePublisher>,
    BoxFuture<'static, ()>,
    Option<Lease>,
)> {
    let (args, control_plane) = (startup.args, startup.control_plane);
    let Some(namespace) = &args.publish_clusterprofiles else {
        return Ok((None, Box::pin(std::future::pending()), lease));
    };
    let control_plane = control_plane.context(
        "--publish-clusterprofiles writes to a control plane: give --kubeconfig or \
         --control-plane-url",
    )?;
    let lease = startup.lease_or_join(lease, control_plane).await?;
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
    use crate::{cli::tests::directory, metrics::Metrics};
    use cluster_registry::{DirectoryConfig, RegistryBuilder};

    #[tokio::test]
    async fn publishing_without_a_control_plane_is_refused_saying_what_to_give() {
        let args = directory(&["--publish-clusterprofiles", "fleet"]);
        let (registry, _events, _driver) = RegistryBuilder::new()
            .directory(DirectoryConfig::new(std::path::PathBuf::from("/m")))
            .build();
        let metrics = Metrics::new();
        let startup = |args| Startup {
            args,
            control_plane: None,
            identity: "me",
            metrics: &metrics,
        };
        let refused = start(startup(&args), &registry, None).await;
        let err = refused.err().unwrap().to_string();
        assert!(err.contains("--kubeconfig or --control-plane-url"), "{err}");

        let off = directory(&[]);
        let (publisher, _writes, lease) = start(startup(&off), &registry, None).await.unwrap();
        let nothing = publisher.is_none() && lease.is_none();
        assert!(nothing, "nothing without the flag");
    }
}
