//! Watch streams as the registry consumes them, and the relist bookkeeping they need.

use std::collections::BTreeSet;

use futures::{Stream, StreamExt as _};
use kube::{
    Api, Resource,
    runtime::{WatchStreamExt as _, watcher},
};
use serde::de::DeserializeOwned;

/// `watcher` → drop `Init` → `default_backoff`.
///
/// NB: kube-runtime 5 yields `Ok(Event::Init)` right after a failed list, and any `Ok` resets
/// the backoff, so a list that always fails (a 403, say) would be retried about once a second
/// forever. `Init` is dropped before the backoff; [`Relist`] notices a relist from its first
/// `InitApply`/`InitDone` instead.
pub(crate) fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(api, config)
        .filter(|event| std::future::ready(!matches!(event, Ok(watcher::Event::Init))))
        .default_backoff()
}

/// What the apiserver said when it refused (403) a watch's list, if that is what `err` is.
///
/// Only the list counts: it is what a missing RBAC rule fails first, and a watch that has
/// listed once keeps what it listed through later errors.
pub(crate) fn list_forbidden(err: &watcher::Error) -> Option<&str> {
    match err {
        watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 403 => {
            Some(&status.message)
        }
        _ => None,
    }
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
    /// An `Apply` (`listed == false`) or `InitApply` (`listed == true`) of `key`.
    pub(crate) fn applied(&mut self, key: &K, listed: bool) {
        if listed {
            self.listing.get_or_insert_default().insert(key.clone());
        }
        self.known.insert(key.clone());
    }

    /// A `Delete` of `key`.
    pub(crate) fn deleted(&mut self, key: &K) {
        self.known.remove(key);
        if let Some(listing) = &mut self.listing {
            listing.remove(key);
        }
    }

    /// An error: a relist in progress is abandoned.
    pub(crate) fn failed(&mut self) {
        self.listing = None;
    }

    /// `InitDone`: returns the keys that were known but not listed (now gone).
    pub(crate) fn done(&mut self) -> Vec<K> {
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

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: format!("status {code}"),
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn only_a_refused_list_is_list_forbidden() {
        let forbidden = watcher::Error::InitialListFailed(api_error(403));
        assert_eq!(list_forbidden(&forbidden), Some("status 403"));
        for other in [
            watcher::Error::InitialListFailed(api_error(500)),
            watcher::Error::InitialListFailed(api_error(401)),
            watcher::Error::WatchStartFailed(api_error(403)),
            watcher::Error::NoResourceVersion,
        ] {
            assert_eq!(list_forbidden(&other), None, "{other}");
        }
    }

    #[test]
    fn objects_missing_from_a_relist_are_gone() {
        let mut relist = Relist::default();
        relist.applied(&"a", true);
        relist.applied(&"b", true);
        assert!(relist.done().is_empty());
        relist.applied(&"c", false);
        // the watch dropped; b was deleted meanwhile
        relist.applied(&"a", true);
        relist.applied(&"c", true);
        assert_eq!(relist.done(), ["b"]);
    }

    #[test]
    fn an_empty_relist_removes_everything() {
        let mut relist = Relist::default();
        relist.applied(&"a", false);
        assert_eq!(relist.done(), ["a"]);
    }

    #[test]
    fn a_failed_relist_is_started_over() {
        let mut relist = Relist::default();
        relist.applied(&"a", true);
        relist.applied(&"b", true);
        relist.done();
        relist.applied(&"a", true); // partial list, then an error
        relist.failed();
        relist.applied(&"b", true);
        assert_eq!(relist.done(), ["a"]);
    }

    #[test]
    fn deleted_objects_are_forgotten() {
        let mut relist = Relist::default();
        relist.applied(&"a", false);
        relist.deleted(&"a");
        assert!(relist.done().is_empty());
    }
}
