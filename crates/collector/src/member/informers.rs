//! Long-lived watches on one member, mirrored into in-memory stores.
//!
//! Every reconnect goes through the member's client, so it takes the current token from the
//! cache: a rotation needs no restart and no relist. Relists (an initial list done after the
//! first) and watch errors, classified (a 401 is an auth failure), are counted per member.

use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client,
    api::DynamicObject,
    runtime::{WatchStreamExt as _, reflector, reflector::Store, watcher},
};
use member_client::{
    FailureKind, watch_backoff::WatchBackoffExt as _, watch_backoff::watch_backoff,
};
use serde::de::DeserializeOwned;

use super::informer_state::InformerStates;
use crate::{
    metrics::Metrics,
    mirror::{InitialList, LIST_PAGE_SIZE, MirroredResource, capped_watch, with_fallback},
};

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

impl Informers {
    /// Stops every watch and waits until none runs, so that nothing records for the member
    /// afterwards.
    pub(crate) async fn stop(mut self) {
        for task in std::mem::take(&mut self.tasks) {
            task.abort();
            // An aborted task ends with a cancellation error: that is the point.
            let _ = task.await;
        }
    }
}

impl Drop for Informers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// How long the apiserver keeps one watch request open. The watcher reconnects from the last
/// resourceVersion after it (no relist), and treats a watch silent for this long plus a
/// margin as dead: that bounds how long a stream to a frozen member or over a dead network can
/// stay open unnoticed. kube's default is 290 s.
const WATCH_TIMEOUT_SECONDS: u32 = 120;

/// What every watch of one member reports to.
struct Reporting<'a> {
    member: &'a str,
    metrics: &'a Metrics,
    states: &'a InformerStates,
    replacing: bool,
    /// The most objects one kind may hold.
    max_objects: usize,
    initial_list: InitialList,
}

/// Starts watching Nodes and every resource in `mirror` on `member` through `client`.
///
/// With `replacing` (the member's client was rebuilt), the first list of each watch counts as
/// a relist too: from the member's point of view it is one, and a rotation that wrongly
/// rebuilt clients must show in the metric. Each watch gets its first state as `initial_list`
/// says, or in pages where the member refuses to stream it.
pub(crate) fn start(
    member: &str,
    client: &Client,
    mirror: &[MirroredResource],
    metrics: &Metrics,
    replacing: bool,
    max_objects: usize,
    initial_list: InitialList,
) -> (MemberStores, InformerStates, Informers) {
    let states = InformerStates::default();
    let reporting = Reporting {
        member,
        metrics,
        states: &states,
        replacing,
        max_objects,
        initial_list,
    };
    let (nodes, nodes_task) = watch(&reporting, "core/v1/nodes", Api::all(client.clone()), ());
    let (resources, tasks): (Vec<_>, Vec<_>) = (mirror.iter())
        .map(|resource| {
            let api_resource = resource.api_resource();
            let api = Api::all_with(client.clone(), &api_resource);
            let (store, task) = watch(&reporting, &resource.to_string(), api, api_resource);
            ((resource.clone(), store), task)
        })
        .unzip();
    let tasks = std::iter::once(nodes_task).chain(tasks).collect();
    let stores = MemberStores { nodes, resources };
    (stores, states, Informers { tasks })
}

fn watch<K>(
    reporting: &Reporting<'_>,
    resource: &str,
    api: Api<K>,
    dyntype: K::DynamicType,
) -> (Store<K>, tokio::task::JoinHandle<()>)
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync + Unpin,
{
    let writer = reflector::store::Writer::new(dyntype.clone());
    let store = writer.as_reader();
    let member = reporting.member.to_owned();
    let resource = resource.to_owned();
    let metrics = reporting.metrics.clone();
    let states = reporting.states.clone();
    states.add(&resource);
    let observed = resource.clone();
    // Every initial list but the very first of this member's watch is a relist, counted when
    // it is done: a streamed list that falls back to pages midway is one list.
    let mut lists = u64::from(reporting.replacing);
    let config = watcher::Config::default()
        .timeout(WATCH_TIMEOUT_SECONDS)
        .page_size(LIST_PAGE_SIZE);
    let watch = move |how: InitialList| -> BoxStream<'static, watcher::Result<watcher::Event<K>>> {
        watcher(api.clone(), how.configure(config.clone()))
            .backoff_until_progress(watch_backoff())
            .boxed()
    };
    let refused = {
        let (member, resource) = (member.clone(), resource.clone());
        move || tracing::debug!(member = %member, resource = %resource, "the member does not serve streaming lists; listing in pages")
    };
    let start = with_fallback(reporting.initial_list, watch, refused);
    let stream = capped_watch(start, store.clone(), dyntype, reporting.max_objects)
        .inspect(move |event| states.observe(&observed, event))
        .inspect(move |event| match event {
            Ok(watcher::Event::InitDone) => {
                lists += 1;
                if lists > 1 {
                    metrics.record_relist(&member, &resource);
                    tracing::debug!(member = %member, resource = %resource, "relisted");
                }
            }
            Ok(_) => {}
            Err(err) => {
                let kind = FailureKind::of_watch(err);
                let err = member_client::text::Text::new(&err.to_string());
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
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    (count(nodes.len()), count(ready))
}
