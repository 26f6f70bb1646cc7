//! Backoff for watcher streams that a failed list cannot reset.
//!
//! kube-runtime 5's watcher yields `Ok(Event::Init)` right after a failed list (it restarts the
//! list), and `StreamBackoff` resets on any `Ok`, so with `default_backoff()` a dead credential
//! is retried about once a second forever. This adapter resets only on events that prove
//! progress (`InitApply`, `InitDone`, `Apply`, `Delete`), so the delay keeps growing while every
//! attempt fails.

use std::{
    pin::Pin,
    task::{Context, Poll, ready},
};

use futures::Stream;
use kube::runtime::{utils::Backoff, watcher};
use tokio::time::{Sleep, sleep};

/// The backoff for member watches: from 0.5 s, doubling, at most 10 s, with jitter.
///
/// kube's default starts at 0.8 s and climbs to 30 s; after a member apiserver restart of a few
/// seconds that left watches up to ~7 s behind. A member that stays down is retried every 10 s,
/// one request per watch, which a member can afford.
pub fn member_watch_backoff() -> watcher::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(std::time::Duration::from_millis(500))
        .with_max_delay(std::time::Duration::from_secs(10))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .into()
}

/// Extension for watcher streams.
pub trait WatchBackoffExt<K>: Stream<Item = watcher::Result<watcher::Event<K>>> + Sized {
    /// Pauses after each error for `backoff`'s next delay, resetting it only on progress.
    fn backoff_until_progress<B: Backoff>(self, backoff: B) -> ProgressBackoff<Self, B> {
        ProgressBackoff {
            stream: Box::pin(self),
            backoff,
            sleeping: None,
            given_up: false,
        }
    }
}

impl<K, S> WatchBackoffExt<K> for S where S: Stream<Item = watcher::Result<watcher::Event<K>>> {}

/// Stream returned by [`WatchBackoffExt::backoff_until_progress`].
pub struct ProgressBackoff<S, B> {
    stream: Pin<Box<S>>,
    backoff: B,
    /// Set after an error: the next poll waits for it before polling the stream again.
    sleeping: Option<Pin<Box<Sleep>>>,
    /// The policy returned no further delay: the stream has ended.
    given_up: bool,
}

impl<K, S, B> Stream for ProgressBackoff<S, B>
where
    S: Stream<Item = watcher::Result<watcher::Event<K>>>,
    B: Backoff,
{
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.given_up {
            return Poll::Ready(None);
        }
        if let Some(sleeping) = self.sleeping.as_mut() {
            ready!(sleeping.as_mut().poll(cx));
            self.sleeping = None;
        }
        let item = ready!(self.stream.as_mut().poll_next(cx));
        match &item {
            Some(Err(_)) => match self.backoff.next() {
                Some(delay) => self.sleeping = Some(Box::pin(sleep(delay))),
                // The policy gave up: end the stream after this error.
                None => self.given_up = true,
            },
            Some(Ok(watcher::Event::Init)) | None => {}
            Some(Ok(_)) => self.backoff.reset(),
        }
        Poll::Ready(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{StreamExt as _, channel::mpsc, poll};
    use kube::runtime::watcher::{DefaultBackoff, Event};
    use std::time::Duration;

    fn list_failed() -> watcher::Error {
        watcher::Error::NoResourceVersion
    }

    /// The sequence kube-runtime 5 produces while a credential is dead: Err, Init, Err, Init, …
    #[tokio::test(start_paused = true)]
    async fn init_after_a_failed_list_does_not_reset_the_backoff() {
        let (tx, rx) = mpsc::unbounded::<watcher::Result<Event<u8>>>();
        let mut stream = rx.backoff_until_progress(DefaultBackoff::default());
        let mut delays = Vec::new();
        for _ in 0..5 {
            tx.unbounded_send(Err(list_failed())).unwrap();
            assert!(stream.next().await.unwrap().is_err());
            tx.unbounded_send(Ok(Event::Init)).unwrap();
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
        let (tx, rx) = mpsc::unbounded::<watcher::Result<Event<u8>>>();
        let mut stream = rx.backoff_until_progress(DefaultBackoff::default());
        for _ in 0..4 {
            tx.unbounded_send(Err(list_failed())).unwrap();
            stream.next().await.unwrap().unwrap_err();
            tx.unbounded_send(Ok(Event::Init)).unwrap();
            stream.next().await.unwrap().unwrap();
        }
        tx.unbounded_send(Ok(Event::InitDone)).unwrap();
        stream.next().await.unwrap().unwrap();
        tx.unbounded_send(Err(list_failed())).unwrap();
        stream.next().await.unwrap().unwrap_err();
        tx.unbounded_send(Ok(Event::Init)).unwrap();
        let started = tokio::time::Instant::now();
        stream.next().await.unwrap().unwrap();
        assert!(
            started.elapsed() <= Duration::from_secs(2),
            "reset to the first delay"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_pauses_the_next_poll() {
        let (tx, rx) = mpsc::unbounded::<watcher::Result<Event<u8>>>();
        let mut stream = Box::pin(rx.backoff_until_progress(DefaultBackoff::default()));
        tx.unbounded_send(Err(list_failed())).unwrap();
        tx.unbounded_send(Ok(Event::Init)).unwrap();
        assert!(stream.next().await.unwrap().is_err());
        assert!(
            poll!(stream.next()).is_pending(),
            "sleeping after the error"
        );
    }
}
