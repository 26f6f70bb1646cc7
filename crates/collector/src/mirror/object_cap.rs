//! A cap on the objects one member's watch of one kind may put in the mirror.
//!
//! Every page of a list is bounded in bytes by the member's transport, but a member can hand
//! out pages for ever, or a watch can add objects for ever: the store would grow until the
//! collector is killed. [`capped_watch`] passes a watcher's events to the store only while the
//! kind holds at most `limit` objects. The event that would break it is replaced by an error
//! ([`LimitExceeded::TooManyObjects`]), the watch is dropped (its list buffer with it) and
//! started again after [`REST`]: the store keeps what it held, never more than `limit`, and
//! the member is reported for as long as it sends too many.

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use futures::{Stream, StreamExt as _, stream::BoxStream};
use kube::runtime::{
    reflector::{ObjectRef, Store},
    watcher,
};
use member_client::response_limit::LimitExceeded;

/// How long a watch that broke the cap rests before it lists again.
pub(crate) const REST: Duration = Duration::from_secs(15);

/// The objects listed per page: a page is held whole in memory while it is parsed, so it is
/// kept small (client-go lists 500).
pub const LIST_PAGE_SIZE: u32 = 100;

/// The events of the watches `start` makes, passed on while the kind holds at most `limit`
/// objects; see the [module](self) docs. `store` is the store the events fill.
pub(crate) fn capped_watch<K, F>(
    mut start: F,
    store: Store<K>,
    dyntype: K::DynamicType,
    limit: usize,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync + Unpin,
    F: FnMut() -> BoxStream<'static, watcher::Result<watcher::Event<K>>> + Send + Unpin + 'static,
{
    Capped {
        state: State::Watching(start()),
        start,
        store,
        dyntype,
        limit,
        listed: 0,
    }
}

enum State<K> {
    Watching(BoxStream<'static, watcher::Result<watcher::Event<K>>>),
    Resting(Pin<Box<tokio::time::Sleep>>),
}

struct Capped<K: kube::Resource + 'static, F>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    start: F,
    store: Store<K>,
    dyntype: K::DynamicType,
    limit: usize,
    state: State<K>,
    /// Objects in the list under way.
    listed: usize,
}

impl<K, F> Capped<K, F>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    /// Whether `event` would take the kind over the cap.
    fn breaks_cap(&mut self, event: &watcher::Event<K>) -> Option<watcher::Error> {
        let limit = self.limit;
        let over = || kube::Error::Service(Box::new(LimitExceeded::TooManyObjects { limit }));
        match event {
            watcher::Event::Init => {
                self.listed = 0;
                None
            }
            watcher::Event::InitApply(_) => {
                self.listed = self.listed.saturating_add(1);
                (self.listed > self.limit).then(|| watcher::Error::InitialListFailed(over()))
            }
            watcher::Event::Apply(object) => {
                let full = self.store.len() >= self.limit;
                let new = || {
                    let key = ObjectRef::from_obj_with(object, self.dyntype.clone());
                    self.store.get(&key).is_none()
                };
                (full && new()).then(|| watcher::Error::WatchFailed(over()))
            }
            watcher::Event::Delete(_) | watcher::Event::InitDone => None,
        }
    }
}

impl<K, F> Stream for Capped<K, F>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Unpin,
    F: FnMut() -> BoxStream<'static, watcher::Result<watcher::Event<K>>> + Unpin,
{
    type Item = watcher::Result<watcher::Event<K>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            match &mut this.state {
                State::Resting(rest) => {
                    std::task::ready!(rest.as_mut().poll(cx));
                    this.listed = 0;
                    this.state = State::Watching((this.start)());
                }
                State::Watching(watch) => {
                    let item = std::task::ready!(watch.poll_next_unpin(cx));
                    let Some(Ok(event)) = item else {
                        return Poll::Ready(item);
                    };
                    if let Some(err) = this.breaks_cap(&event) {
                        // Dropping the watch drops the page it was in.
                        this.state = State::Resting(Box::pin(tokio::time::sleep(REST)));
                        return Poll::Ready(Some(Err(err)));
                    }
                    return Poll::Ready(Some(Ok(event)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::{Stream, stream};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::{WatchStreamExt as _, reflector};

    use super::*;

    fn object(name: &str) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.name = Some(name.to_owned());
        object.metadata.namespace = Some("ns".to_owned());
        object
    }

    /// A member whose every list holds `count` objects, then watches adding more.
    fn listing(count: usize) -> BoxStream<'static, watcher::Result<watcher::Event<ConfigMap>>> {
        let init = std::iter::once(watcher::Event::Init)
            .chain((0..count).map(|i| watcher::Event::InitApply(object(&format!("o{i}")))))
            .chain([watcher::Event::InitDone]);
        let watch = (0..).map(|i| watcher::Event::Apply(object(&format!("w{i}"))));
        stream::iter(init.chain(watch.take(10)).map(Ok))
            .chain(stream::pending())
            .boxed()
    }

    type Events = std::pin::Pin<Box<dyn Stream<Item = watcher::Result<watcher::Event<ConfigMap>>>>>;

    /// A watch capped at 5 objects of a member that lists `count`, reflected into the store.
    fn capped(count: usize) -> (reflector::Store<ConfigMap>, Events) {
        let writer = reflector::store::Writer::<ConfigMap>::default();
        let store = writer.as_reader();
        let events = capped_watch(move || listing(count), store.clone(), (), 5).reflect(writer);
        (store, Box::pin(events))
    }

    /// Waits for the next error of `events`, which must be the cap's.
    async fn the_cap_breaks(events: &mut Events) {
        let err = loop {
            if let Err(err) = events.next().await.expect("the watch ended") {
                break err;
            }
        };
        let limit = LimitExceeded::find_in(&err).cloned();
        assert_eq!(limit, Some(LimitExceeded::TooManyObjects { limit: 5 }));
    }

    #[tokio::test(start_paused = true)]
    async fn a_list_over_the_cap_never_reaches_the_store() {
        let (store, mut events) = capped(1_000);
        // Two lists, rested between.
        the_cap_breaks(&mut events).await;
        the_cap_breaks(&mut events).await;
        assert_eq!(store.len(), 0, "nothing over the cap was stored");
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_adding_objects_stops_at_the_cap() {
        let (store, mut events) = capped(3);
        the_cap_breaks(&mut events).await;
        assert_eq!(store.len(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_kind_at_the_cap_is_mirrored_whole() {
        let (store, events) = capped(5);
        let seen: Vec<_> = events.take(7).collect().await;
        assert!(seen.iter().all(Result::is_ok));
        assert_eq!(store.len(), 5);
    }
}
