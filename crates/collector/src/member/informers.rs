//! Long-lived watches on one member, mirrored into in-memory stores.
//!
//! Every reconnect goes through the member's client, so it takes the current token from the
//! cache: a rotation needs no restart and no relist. Relists (an `Init` after the first) and
//! watch errors, classified (a 401 is an auth failure), are counted per member.

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client,
    api::DynamicObject,
    runtime::{WatchStreamExt as _, reflector, reflector::Store, watcher},
};
use member_client::{FailureKind, WatchBackoffExt as _, watch_backoff};
use serde::de::DeserializeOwned;

use crate::{metrics::Metrics, mirror::MirroredResource};

/// The stores one member's watches fill.
#[derive(Clone)]
pub(crate) struct MemberStores {
    /// The member's Nodes, for the node summary.
    pub(crate) nodes: Store<Node>,
    /// One store per mirrored resource.
    pub(crate) resources: Vec<(MirroredResource, Store<DynamicObject>)>,
}

/// The watch tasks of one member; dropping it stops them.
pub(crate) struct Informers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Informers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts watching Nodes and every resource in `mirror` on `member` through `client`.
///
/// With `replacing` (the member's client was rebuilt), the first list of each watch counts as
/// a relist too: from the member's point of view it is one, and a rotation that wrongly
/// rebuilt clients must show in the metric.
pub(crate) fn start(
    member: &str,
    client: &Client,
    mirror: &[MirroredResource],
    metrics: &Metrics,
    replacing: bool,
) -> (MemberStores, Informers) {
    let mut tasks = Vec::with_capacity(mirror.len() + 1);
    let (nodes, task) = watch(
        member,
        "core/v1/nodes",
        Api::<Node>::all(client.clone()),
        (),
        metrics,
        replacing,
    );
    tasks.push(task);
    let mut resources = Vec::with_capacity(mirror.len());
    for resource in mirror {
        let api_resource = resource.api_resource();
        let api = Api::<DynamicObject>::all_with(client.clone(), &api_resource);
        let (store, task) = watch(
            member,
            &resource.to_string(),
            api,
            api_resource,
            metrics,
            replacing,
        );
        resources.push((resource.clone(), store));
        tasks.push(task);
    }
    (MemberStores { nodes, resources }, Informers { tasks })
}

fn watch<K>(
    member: &str,
    resource: &str,
    api: Api<K>,
    dyntype: K::DynamicType,
    metrics: &Metrics,
    replacing: bool,
) -> (Store<K>, tokio::task::JoinHandle<()>)
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let writer = reflector::store::Writer::new(dyntype);
    let store = writer.as_reader();
    let member = member.to_owned();
    let resource = resource.to_owned();
    let metrics = metrics.clone();
    // Every Init but the very first list of this member's watch is a relist.
    let mut inits = u64::from(replacing);
    let stream = watcher(api, watcher::Config::default())
        .backoff_until_progress(watch_backoff())
        .inspect(move |event| match event {
            Ok(watcher::Event::Init) => {
                inits += 1;
                if inits > 1 {
                    metrics.record_relist(&member, &resource);
                    tracing::debug!(member = %member, resource = %resource, "relisting");
                }
            }
            Ok(_) => {}
            Err(err) => {
                let kind = FailureKind::of_watch(err);
                metrics.record_watch_error(&member, &resource, kind);
                if kind == FailureKind::Unauthorized {
                    tracing::warn!(member = %member, resource = %resource, error = %err, "watch rejected: credential not accepted");
                } else {
                    tracing::debug!(member = %member, resource = %resource, error = %err, "watch failed");
                }
            }
        })
        .reflect(writer);
    let task = tokio::spawn(stream.for_each(|_| std::future::ready(())));
    (store, task)
}

/// Nodes in total and with `Ready=True`.
pub(crate) fn node_summary(nodes: &Store<Node>) -> (i32, i32) {
    let nodes = nodes.state();
    let ready = nodes
        .iter()
        .filter(|node| {
            node.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    (
        i32::try_from(nodes.len()).unwrap_or(i32::MAX),
        i32::try_from(ready).unwrap_or(i32::MAX),
    )
}
