//! Backoff for watcher streams that a failed list cannot reset.
//!
//! kube-runtime 5's watcher yields `Ok(Event::Init)` right after a failed list (it restarts the
//! list), and its `StreamBackoff` resets on any `Ok`, so with `default_backoff()` a dead
//! credential is retried about once a second forever. [`ProgressBackoff`] resets only on events
//! that prove progress (`InitApply`, `InitDone`, `Apply`, `Delete`), so the delay keeps growing
//! while every attempt fails. [`list_forbidden`] tells a refused list (403) from other failures.

use std::{
    pin::Pin,
    task::{Context, Poll, ready},
    time::Duration,
};

use futures::Stream;
use kube::runtime::{utils::Backoff, watcher};
use tokio::time::{Sleep, sleep};

pub use crate::failure_kind::list_forbidden;

/// The backoff for watches: from 0.5 s, doubling, at most 10 s, with jitter.
///
/// kube's default starts at 0.8 s and climbs to 30 s; after a member apiserver restart of a few
/// seconds that left watches up to ~7 s behind. A cluster that stays down is retried every 10 s,
/// one request per watch, which any apiserver can afford.
pub fn watch_backoff() -> watcher::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(10))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .into()
}

/// Extension for watcher streams.
///
/// ```no_run
/// # async fn doc(client: kube::Client) {
/// use futures::StreamExt as _;
/// use k8s_openapi::api::core::v1::Node;
/// use kube::{Api, runtime::watcher};
/// use member_client::{watch_backoff::WatchBackoffExt as _, watch_backoff::watch_backoff};
///
/// let mut nodes = watcher(Api::<Node>::all(client), watcher::Config::default())
///     .backoff_until_progress(watch_backoff())
///     .boxed();
/// while let Some(event) = nodes.next().await {
///     // an error is followed by a pause that only progress shortens again
/// }
/// # }
/// ```
pub trait WatchBackoffExt<K>: Stream<Item = watcher::Result<watcher::Event<K>>> + Sized {
    /// Pauses after each error for `backoff`'s next delay, resetting it only on progress.
    fn backoff_until_progress<B: Backoff>(self, backoff: B) -> ProgressBackoff<Self, B> {
        ProgressBackoff {
            stream: Box::pin(self),
            backoff,
            state: State::Awake,
        }
    }
}

impl<K, S> WatchBackoffExt<K> for S where S: Stream<Item = watcher::Result<watcher::Event<K>>> {}

/// Stream returned by [`WatchBackoffExt::backoff_until_progress`].
///
/// # Recovery
/// After an error it yields nothing until the delay passes; if the policy returns no further
/// delay, the stream ends after that error.
pub struct ProgressBackoff<S, B> {
    stream: Pin<Box<S>>,
    backoff: B,
    state: State,
}

/// Where a [`ProgressBackoff`] is, the way kube-runtime's `StreamBackoff` keeps it.
enum State {
    /// The next poll polls the stream: an error moves to `Sleeping` (or `GaveUp`), progress
    /// resets the policy, `Init` and the stream's end change nothing.
    Awake,
    /// An error was yielded; the next poll waits for this sleep, then is `Awake`.
    Sleeping(Pin<Box<Sleep>>),
    /// The policy returned no further delay after an error: every poll says the stream ended.
    GaveUp,
}

impl<K, S, B> Stream for ProgressBackoff<S, B>
where
    S: Stream<Item = watcher::Result<watcher::Event<K>>>,
    B: Backoff,
{
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match &mut self.state {
                State::GaveUp => return Poll::Ready(None),
                State::Sleeping(sleeping) => {
                    ready!(sleeping.as_mut().poll(cx));
                    self.state = State::Awake;
                }
                State::Awake => {
                    let item = ready!(self.stream.as_mut().poll_next(cx));
                    match &item {
                        Some(Err(_)) => {
                            self.state = match self.backoff.next() {
                                Some(delay) => State::Sleeping(Box::pin(sleep(delay))),
                                None => State::GaveUp,
                            };
                        }
                        Some(Ok(watcher::Event::Init)) | None => {}
                        Some(Ok(_)) => self.backoff.reset(),
                    }
                    return Poll::Ready(item);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{StreamExt as _, channel::mpsc, poll};
    use kube::runtime::watcher::{DefaultBackoff, Event};

    type Events = mpsc::UnboundedReceiver<watcher::Result<Event<u8>>>;

    /// A watcher stream under `backoff`, and where the test sends it `n` failed lists, each
    /// followed by the `Init` of the watcher's next attempt.
    fn failing<B: Backoff>(
        backoff: B,
        n: usize,
    ) -> (
        mpsc::UnboundedSender<watcher::Result<Event<u8>>>,
        ProgressBackoff<Events, B>,
    ) {
        let (tx, rx) = mpsc::unbounded();
        for _ in 0..n {
            tx.unbounded_send(Err(watcher::Error::NoResourceVersion))
                .unwrap();
            tx.unbounded_send(Ok(Event::Init)).unwrap();
        }
        (tx, rx.backoff_until_progress(backoff))
    }

    /// The sequence kube-runtime 5 produces while a credential is dead: Err, Init, Err, Init, …
    #[tokio::test(start_paused = true)]
    async fn init_after_a_failed_list_does_not_reset_the_backoff() {
        let (_tx, mut stream) = failing(DefaultBackoff::default(), 5);
        let mut delays = Vec::new();
        for _ in 0..5 {
            assert!(stream.next().await.unwrap().is_err());
            let started = tokio::time::Instant::now();
            assert!(matches!(stream.next().await, Some(Ok(Event::Init))));
            delays.push(started.elapsed());
        }
        // Exponential from 0.8 s with jitter: the fifth wait is far longer than the first.
        assert!(delays[4] > delays[0] * 4, "delays kept growing: {delays:?}");
        assert!(delays[4] >= Duration::from_secs(5), "{delays:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn progress_resets_the_backoff() {
        let (tx, mut stream) = failing(DefaultBackoff::default(), 4);
        for _ in 0..4 {
            stream.next().await.unwrap().unwrap_err();
            stream.next().await.unwrap().unwrap();
        }
        tx.unbounded_send(Ok(Event::InitDone)).unwrap();
        stream.next().await.unwrap().unwrap();
        tx.unbounded_send(Err(watcher::Error::NoResourceVersion))
            .unwrap();
        stream.next().await.unwrap().unwrap_err();
        tx.unbounded_send(Ok(Event::Init)).unwrap();
        let started = tokio::time::Instant::now();
        stream.next().await.unwrap().unwrap();
        let why = "reset to the first delay";
        assert!(started.elapsed() <= Duration::from_secs(2), "{why}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_pauses_the_next_poll() {
        let (_tx, mut stream) = failing(DefaultBackoff::default(), 1);
        assert!(stream.next().await.unwrap().is_err());
        let why = "sleeping after the error";
        assert!(poll!(stream.next()).is_pending(), "{why}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_policy_that_gives_up_ends_the_stream_after_the_error() {
        let no_retries = backon::ExponentialBuilder::default().with_max_times(0);
        let (_tx, mut stream) = failing(watcher::ExponentialBackoff::from(no_retries), 1);
        assert!(stream.next().await.unwrap().is_err());
        assert!(stream.next().await.is_none(), "gave up");
    }

    #[test]
    fn the_watch_policy_climbs_from_half_a_second_to_ten() {
        let delays: Vec<Duration> = watch_backoff().take(12).collect();
        assert!(delays[0] >= Duration::from_millis(500), "{delays:?}");
        assert!(delays[0] < Duration::from_secs(2), "{delays:?}");
        let most = Duration::from_secs(20);
        assert!(delays.iter().all(|d| *d <= most), "{delays:?}");
    }
}
