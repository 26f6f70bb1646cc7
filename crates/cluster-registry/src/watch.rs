//! Watch streams as the registry consumes them, and the relist bookkeeping they need.

use std::collections::BTreeSet;

use futures::Stream;
use kube::{
    Api, Resource,
    runtime::{watcher, watcher::Event},
};
use member_client::{watch_backoff::WatchBackoffExt as _, watch_backoff::watch_backoff};
use serde::de::DeserializeOwned;

/// `watcher` → the shared progress backoff ([`watch_backoff`]).
///
/// NB: kube-runtime 5 yields `Ok(Event::Init)` right after a failed list; the progress backoff
/// does not count it as progress, so a list that always fails (a 403, say) backs off up to
/// 10 s instead of retrying about once a second. The consumers ignore `Init`: [`Relist`]
/// notices a relist from its first `InitApply`/`InitDone` instead.
pub(crate) fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(api, config).backoff_until_progress(watch_backoff())
}

/// What one watch event changes, once [`Relist`] has recorded it.
pub(crate) enum Change<T, K> {
    /// The object, whose key is `K`, is new or changed.
    Applied(T, K),
    /// The object of this key is gone.
    Deleted(K),
    /// A (re)list is done; these keys were known but not listed, so they are gone.
    Listed(Vec<K>),
    /// The watch failed (a relist in progress is abandoned); it retries by itself.
    Failed(watcher::Error),
}

/// Which objects one watch stream has applied, so that objects missing from a relist (deleted
/// while the watch was down) can be removed.
///
/// A relist is `InitApply`* then `InitDone`; an error in between abandons it (the watcher lists
/// again from the start).
#[derive(Debug)]
pub(crate) struct Relist<K> {
    known: BTreeSet<K>,
    listing: Option<BTreeSet<K>>,
}

impl<K: Ord + Clone> Default for Relist<K> {
    fn default() -> Self {
        Self {
            known: BTreeSet::new(),
            listing: None,
        }
    }
}

impl<K: Ord + Clone> Relist<K> {
    /// Records `event`, whose object's key is `key(object)`, and says what it changes; `None`
    /// for `Init`, which changes nothing.
    pub(crate) fn record<T>(
        &mut self,
        event: Result<Event<T>, watcher::Error>,
        key: impl Fn(&T) -> K,
    ) -> Option<Change<T, K>> {
        Some(match event {
            Ok(Event::Apply(object)) => self.apply(object, key, false),
            Ok(Event::InitApply(object)) => self.apply(object, key, true),
            Ok(Event::Delete(object)) => {
                let key = key(&object);
                self.deleted(&key);
                Change::Deleted(key)
            }
            Ok(Event::Init) => return None,
            Ok(Event::InitDone) => Change::Listed(self.done()),
            Err(err) => {
                self.failed();
                Change::Failed(err)
            }
        })
    }

    fn apply<T>(&mut self, object: T, key: impl Fn(&T) -> K, listed: bool) -> Change<T, K> {
        let key = key(&object);
        self.applied(&key, listed);
        Change::Applied(object, key)
    }

    /// An `Apply` (`listed == false`) or `InitApply` (`listed == true`) of `key`.
    pub(crate) fn applied(&mut self, key: &K, listed: bool) {
        if listed {
            self.listing.get_or_insert_default().insert(key.clone());
        }
        self.known.insert(key.clone());
    }

    /// A `Delete` of `key`.
    fn deleted(&mut self, key: &K) {
        self.known.remove(key);
        if let Some(listing) = &mut self.listing {
            listing.remove(key);
        }
    }

    /// An error: a relist in progress is abandoned.
    fn failed(&mut self) {
        self.listing = None;
    }

    /// `InitDone`: returns the keys that were known but not listed (now gone).
    fn done(&mut self) -> Vec<K> {
        let listed = self.listing.take().unwrap_or_default();
        let gone = self.known.difference(&listed).cloned().collect();
        self.known = listed;
        gone
    }

    /// Every key this stream has applied; used when the stream is dropped.
    pub(crate) fn into_known(self) -> BTreeSet<K> {
        self.known
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that has listed `keys` and finished that list.
    fn listed(keys: &[&'static str]) -> Relist<&'static str> {
        let mut relist = Relist::default();
        for key in keys {
            relist.applied(key, true);
        }
        assert!(relist.done().is_empty(), "a first list removes nothing");
        relist
    }

    #[test]
    fn objects_missing_from_a_relist_are_gone() {
        let mut relist = listed(&["a", "b"]);
        relist.applied(&"c", false);
        // the watch dropped; b was deleted meanwhile
        relist.applied(&"a", true);
        relist.applied(&"c", true);
        assert_eq!(relist.done(), ["b"]);
    }

    /// A stream that has seen one `Apply` of `key`, outside any list.
    fn applied(key: &'static str) -> Relist<&'static str> {
        let mut relist = Relist::default();
        relist.applied(&key, false);
        relist
    }

    #[test]
    fn an_empty_relist_removes_everything() {
        assert_eq!(applied("a").done(), ["a"]);
    }

    #[test]
    fn a_failed_relist_is_started_over() {
        let mut relist = listed(&["a", "b"]);
        relist.applied(&"a", true); // partial list, then an error
        relist.failed();
        relist.applied(&"b", true);
        assert_eq!(relist.done(), ["a"]);
    }

    #[test]
    fn deleted_objects_are_forgotten() {
        let mut relist = applied("a");
        relist.deleted(&"a");
        assert!(relist.done().is_empty());
    }
}
