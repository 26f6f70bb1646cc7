//! What each of a member's informers last did: still listing, in sync, or failing and how.
//!
//! A member whose `/readyz` answers but whose mirror cannot be filled (its identity may not list
//! Deployments, say) is blind while it looks healthy; so the informers' states feed the
//! member's health, not only a log line.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use kube::runtime::watcher;
use member_client::FailureKind;
use tokio::{sync::Notify, time::Instant};

/// How long a failure counts without being seen again. A watch that fails for good fails again
/// within the watch backoff (at most 10 s); one that reconnected says nothing until an object
/// changes, so an old failure is taken to be over.
const FAILURE_FRESHNESS: std::time::Duration = std::time::Duration::from_secs(25);

/// One informer's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum InformerState {
    /// The first list has not completed.
    Syncing,
    /// The store holds what the member has.
    Synced,
    /// The last list or watch failed, and nothing succeeded since.
    Failing(InformerFailure),
}

/// How an informer fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InformerFailure {
    /// What the failure means.
    pub(crate) kind: FailureKind,
    /// `list` or `watch`.
    pub(crate) verb: &'static str,
    /// The apiserver's (or the transport's) words.
    pub(crate) message: String,
    /// Whether the informer had synced before: its store still holds what it listed.
    pub(crate) after_sync: bool,
    /// When it was last seen.
    pub(crate) at: Instant,
    /// The limit the member broke, if that is the failure. It lasts until the informer syncs
    /// or sees an event again: a capped watch says nothing while it rests.
    pub(crate) limit: Option<member_client::response_limit::LimitExceeded>,
}

impl InformerFailure {
    fn of(err: &watcher::Error, after_sync: bool) -> Self {
        let verb = match err {
            watcher::Error::InitialListFailed(_) => "list",
            _ => "watch",
        };
        Self {
            kind: FailureKind::of_watch(err),
            verb,
            // The member wrote most of it (a Status message): it reaches the condition.
            message: member_client::text::Text::new(&err.to_string()).into(),
            after_sync,
            at: Instant::now(),
            limit: member_client::response_limit::LimitExceeded::find_in(err).cloned(),
        }
    }
}

/// The states of one member's informers, by resource (`core/v1/nodes`, …).
///
/// Cloning is cheap; the informers write, the member's prober reads. A change of category
/// (syncing, synced, failing) wakes the prober, so that a member turns Ready the moment its
/// mirror is filled rather than a probe period later.
#[derive(Clone, Default)]
pub(crate) struct InformerStates {
    states: Arc<Mutex<BTreeMap<String, InformerState>>>,
    changed: Arc<Notify>,
}

impl InformerStates {
    /// Registers `resource` as syncing.
    pub(crate) fn add(&self, resource: &str) {
        self.lock()
            .insert(resource.to_owned(), InformerState::Syncing);
    }

    /// Records what a watch event says of `resource`.
    pub(crate) fn observe<K>(&self, resource: &str, event: &watcher::Result<watcher::Event<K>>) {
        let mut states = self.lock();
        let Some(state) = states.get_mut(resource) else {
            return;
        };
        let after_sync = match state {
            InformerState::Syncing => false,
            InformerState::Synced => true,
            InformerState::Failing(failure) => failure.after_sync,
        };
        let next = match event {
            // A relist keeps the store until it is done: still in sync.
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => return,
            Ok(_) => InformerState::Synced,
            // 410 Gone: the watch fell behind and the watcher lists again; nothing is wrong.
            Err(watcher::Error::WatchError(status)) if status.code == 410 => return,
            Err(err) => InformerState::Failing(InformerFailure::of(err, after_sync)),
        };
        let woke = std::mem::discriminant(state) != std::mem::discriminant(&next);
        *state = next;
        drop(states);
        if woke {
            self.changed.notify_one();
        }
    }

    /// Every informer's state now; a failure not seen for a while counts as over.
    pub(crate) fn now(&self) -> BTreeMap<String, InformerState> {
        self.lock()
            .iter()
            .map(|(resource, state)| {
                let state = match state {
                    InformerState::Failing(f)
                        if f.limit.is_none() && f.at.elapsed() > FAILURE_FRESHNESS =>
                    {
                        if f.after_sync {
                            InformerState::Synced
                        } else {
                            InformerState::Syncing
                        }
                    }
                    other => other.clone(),
                };
                (resource.clone(), state)
            })
            .collect()
    }

    /// Resolves at the next change of category.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    // Held only to copy or replace an entry; a panic cannot leave one half-written.
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, InformerState>> {
        self.states.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "core/v1/nodes";

    /// States with one informer, `key`, still syncing.
    fn one(key: &str) -> InformerStates {
        let states = InformerStates::default();
        states.add(key);
        states
    }

    /// How `key`'s informer fails; it must be failing.
    fn failure(states: &InformerStates, key: &str) -> InformerFailure {
        match &states.now()[key] {
            InformerState::Failing(failure) => failure.clone(),
            other => panic!("{key} is not failing: {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_not_seen_again_is_over() {
        let states = one(NODES);
        states.observe::<()>(NODES, &Ok(watcher::Event::InitDone));
        states.observe::<()>(NODES, &Err(forbidden()));
        failure(&states, NODES);
        tokio::time::advance(FAILURE_FRESHNESS + std::time::Duration::from_secs(1)).await;
        assert_eq!(states.now()[NODES], InformerState::Synced);
    }

    #[tokio::test(start_paused = true)]
    async fn a_broken_limit_lasts_until_the_informer_recovers() {
        let states = one(NODES);
        let over = watcher::Error::InitialListFailed(kube::Error::Service(Box::new(
            member_client::response_limit::LimitExceeded::TooManyObjects { limit: 3 },
        )));
        states.observe::<()>(NODES, &Err(over));
        tokio::time::advance(FAILURE_FRESHNESS * 4).await;
        let kind = failure(&states, NODES).kind;
        assert_eq!(kind, FailureKind::LimitExceeded, "the limit was forgotten");
        states.observe::<()>(NODES, &Ok(watcher::Event::InitDone));
        assert_eq!(states.now()[NODES], InformerState::Synced);
    }

    #[test]
    fn a_watch_that_fell_behind_is_no_failure() {
        let states = one(NODES);
        states.observe::<()>(NODES, &Ok(watcher::Event::InitDone));
        let gone = watcher::Error::WatchError(Box::new(
            kube::core::Status::failure("too old resource version", "Expired").with_code(410),
        ));
        states.observe::<()>(NODES, &Err(gone));
        assert_eq!(states.now()[NODES], InformerState::Synced);
    }

    #[test]
    fn a_members_words_in_a_failure_are_sanitized() {
        let states = one(NODES);
        let words = format!("no\nForged=True\u{1b}[2J{}", "x".repeat(1 << 20));
        let hostile = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(
            kube::core::Status::failure(&words, "Forbidden").with_code(403),
        )));
        states.observe::<()>(NODES, &Err(hostile));
        let message = failure(&states, NODES).message;
        let bytes = message.len();
        assert!(
            bytes <= member_client::text::Text::MAX_BYTES,
            "{bytes} bytes"
        );
        assert!(!message.contains('\n') && !message.contains('\u{1b}'));
        assert!(message.contains("Forged=True"));
    }

    fn forbidden() -> watcher::Error {
        watcher::Error::InitialListFailed(kube::Error::Api(Box::new(
            kube::core::Status::failure("deployments.apps is forbidden", "Forbidden")
                .with_code(403),
        )))
    }

    #[test]
    fn an_informer_goes_from_syncing_to_failing_to_synced() {
        let deployments = "apps/v1/deployments";
        let states = one(deployments);
        assert_eq!(states.now()[deployments], InformerState::Syncing);
        states.observe::<()>(deployments, &Err(forbidden()));
        let failed = failure(&states, deployments);
        assert_eq!((failed.kind, failed.verb), (FailureKind::Forbidden, "list"));
        states.observe::<()>(deployments, &Ok(watcher::Event::Init));
        failure(&states, deployments);
        states.observe::<()>(deployments, &Ok(watcher::Event::InitDone));
        assert_eq!(states.now()[deployments], InformerState::Synced);
    }
}
