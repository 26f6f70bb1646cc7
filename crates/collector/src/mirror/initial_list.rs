//! How a watch gets a kind's objects before it follows their changes: streamed by the watch
//! itself where the member serves it, listed in pages otherwise.
//!
//! A streaming list (`sendInitialEvents=true`, Kubernetes' watch-list) costs the member's
//! apiserver one watch served from its watch cache instead of a list, and no page is held
//! whole in memory while it is parsed. An apiserver with the `WatchList` feature off (1.33's
//! default, or one older than 1.32) refuses such a watch as invalid (422), as a proxy in front
//! of it may with 400. [`InitialList::refused_by`] recognizes that refusal, and
//! [`with_fallback`] then starts that watch again listing in pages, for as long as the
//! collector runs: the member is slower to start, never blind. So does a streamed watch that
//! has not marked the end of its initial events within [`INITIAL_EVENTS_DEADLINE`] of its
//! start: an apiserver older than 1.27, or a proxy, may ignore the parameter and serve a plain
//! watch, which never marks it.

use std::{
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use futures::{Stream, StreamExt as _, stream::BoxStream};
use kube::runtime::watcher;

/// How long a streamed watch may take from its start to the end of its initial events. The
/// apiserver sends them from its watch cache at once; a kind too large to stream in this long
/// is listed in pages instead, which is slower, never wrong.
pub(crate) const INITIAL_EVENTS_DEADLINE: Duration = Duration::from_secs(60);

/// How a watch gets its first state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InitialList {
    /// Streamed by the watch (`sendInitialEvents=true`).
    Streamed,
    /// Listed in pages, then watched from the list's resourceVersion.
    Paged,
}

impl InitialList {
    /// Whether `err`, from a watch started this way, is the member refusing streaming lists.
    ///
    /// Only the start of a watch is looked at: a refused parameter fails the request before
    /// any event. A 403 is RBAC, not the parameter, and stays the member's failure.
    pub(crate) fn refused_by(self, err: &watcher::Error) -> bool {
        self == Self::Streamed
            && matches!(
                err,
                watcher::Error::WatchStartFailed(kube::Error::Api(status))
                    if matches!(status.code, 400 | 422)
            )
    }

    /// `config` set to get the first state this way.
    pub(crate) fn configure(self, config: watcher::Config) -> watcher::Config {
        match self {
            Self::Streamed => config.streaming_lists(),
            Self::Paged => config,
        }
    }
}

/// The watch `start` makes with `first` and, once a watch refuses to stream, with
/// [`InitialList::Paged`] from then on (`refused` is called once, then). Call it again to
/// start the watch over: it remembers the refusal.
pub(crate) fn with_fallback<T, F>(
    first: InitialList,
    start: F,
    refused: impl Fn() + Send + Sync + 'static,
) -> impl FnMut() -> BoxStream<'static, watcher::Result<watcher::Event<T>>> + Send + Unpin + 'static
where
    T: Send + 'static,
    F: Fn(InitialList) -> BoxStream<'static, watcher::Result<watcher::Event<T>>>
        + Send
        + Sync
        + 'static,
{
    let paged = Arc::new(AtomicBool::new(first == InitialList::Paged));
    let start = Arc::new(start);
    let refused = Arc::new(refused);
    move || {
        let how = if paged.load(Ordering::Acquire) {
            InitialList::Paged
        } else {
            InitialList::Streamed
        };
        Fallback {
            watch: start(how),
            how,
            initial_events: None,
            paged: Arc::clone(&paged),
            start: Arc::clone(&start),
            refused: Arc::clone(&refused),
        }
        .boxed()
    }
}

struct Fallback<T, F, R> {
    watch: BoxStream<'static, watcher::Result<watcher::Event<T>>>,
    how: InitialList,
    /// While a streamed watch sends its initial events: when it must have ended them.
    initial_events: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Shared with every later start of this watch.
    paged: Arc<AtomicBool>,
    start: Arc<F>,
    refused: Arc<R>,
}

impl<T, F, R> Fallback<T, F, R>
where
    F: Fn(InitialList) -> BoxStream<'static, watcher::Result<watcher::Event<T>>>,
    R: Fn(),
{
    fn list_in_pages(&mut self) {
        self.how = InitialList::Paged;
        self.initial_events = None;
        self.paged.store(true, Ordering::Release);
        (self.refused)();
        self.watch = (self.start)(InitialList::Paged);
    }
}

impl<T, F, R> Stream for Fallback<T, F, R>
where
    F: Fn(InitialList) -> BoxStream<'static, watcher::Result<watcher::Event<T>>>,
    R: Fn(),
{
    type Item = watcher::Result<watcher::Event<T>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(deadline) = &mut this.initial_events
                && deadline.as_mut().poll(cx).is_ready()
            {
                this.list_in_pages();
                continue;
            }
            let item = std::task::ready!(this.watch.poll_next_unpin(cx));
            match item {
                Some(Err(err)) if this.how.refused_by(&err) => this.list_in_pages(),
                // The watcher says Init once the apiserver took the watch.
                Some(Ok(watcher::Event::Init)) if this.how == InitialList::Streamed => {
                    let deadline = tokio::time::sleep(INITIAL_EVENTS_DEADLINE);
                    this.initial_events = Some(Box::pin(deadline));
                    return Poll::Ready(item);
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    this.initial_events = None;
                    return Poll::Ready(item);
                }
                other => return Poll::Ready(other),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    };

    use futures::stream;

    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("sendInitialEvents: Forbidden", "Invalid").with_code(code),
        ))
    }

    /// A member whose streamed watch says what `streamed` gives, and whose paged list holds the
    /// object `1`; `starts` records how each watch was started.
    fn member(
        streamed: impl Fn() -> Vec<watcher::Result<watcher::Event<u32>>> + Send + Sync + 'static,
        starts: Arc<Mutex<Vec<InitialList>>>,
    ) -> impl Fn(InitialList) -> BoxStream<'static, watcher::Result<watcher::Event<u32>>> {
        move |how| {
            starts.lock().unwrap().push(how);
            let events = match how {
                InitialList::Streamed => streamed(),
                InitialList::Paged => vec![
                    Ok(watcher::Event::Init),
                    Ok(watcher::Event::InitApply(1)),
                    Ok(watcher::Event::InitDone),
                ],
            };
            stream::iter(events).chain(stream::pending()).boxed()
        }
    }

    /// A member that answers a streamed watch's start with `code`.
    fn refusing(
        code: u16,
        starts: Arc<Mutex<Vec<InitialList>>>,
    ) -> impl Fn(InitialList) -> BoxStream<'static, watcher::Result<watcher::Event<u32>>> {
        member(
            move || vec![Err(watcher::Error::WatchStartFailed(api_error(code)))],
            starts,
        )
    }

    #[rstest::rstest]
    #[case::invalid(422)]
    #[case::bad_request(400)]
    #[tokio::test]
    async fn a_refused_stream_is_listed_in_pages_from_then_on(#[case] code: u16) {
        let starts = Arc::new(Mutex::new(Vec::new()));
        let refusals = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&refusals);
        let mut start = with_fallback(
            InitialList::Streamed,
            refusing(code, starts.clone()),
            move || {
                counted.fetch_add(1, Ordering::Relaxed);
            },
        );
        let first: Vec<_> = start().take(3).collect().await;
        assert!(
            matches!(
                first.as_slice(),
                [
                    Ok(watcher::Event::Init),
                    Ok(watcher::Event::InitApply(1)),
                    Ok(watcher::Event::InitDone)
                ]
            ),
            "the refusal is not passed on, the paged list is"
        );
        let _restarted: Vec<_> = start().take(3).collect().await;
        assert_eq!(
            *starts.lock().unwrap(),
            [
                InitialList::Streamed,
                InitialList::Paged,
                InitialList::Paged
            ],
            "a watch started again lists in pages at once"
        );
        assert_eq!(refusals.load(Ordering::Relaxed), 1);
    }

    #[rstest::rstest]
    #[case::forbidden(403)]
    #[case::unauthorized(401)]
    #[case::server_error(500)]
    #[tokio::test]
    async fn other_failures_are_the_members_and_keep_streaming(#[case] code: u16) {
        let starts = Arc::new(Mutex::new(Vec::new()));
        let mut start = with_fallback(InitialList::Streamed, refusing(code, starts.clone()), || {});
        let first = start().next().await;
        assert!(
            matches!(&first, Some(Err(watcher::Error::WatchStartFailed(kube::Error::Api(s)))) if s.code == code),
            "{first:?}"
        );
        assert_eq!(*starts.lock().unwrap(), [InitialList::Streamed]);
    }

    /// A member that takes a streamed watch but never marks the end of its initial events, as
    /// one that ignores `sendInitialEvents` does.
    fn ignoring(
        starts: Arc<Mutex<Vec<InitialList>>>,
    ) -> impl Fn(InitialList) -> BoxStream<'static, watcher::Result<watcher::Event<u32>>> {
        let initial = || vec![Ok(watcher::Event::Init), Ok(watcher::Event::InitApply(7))];
        member(initial, starts)
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_without_the_end_of_its_initial_events_is_listed_in_pages_by_the_deadline() {
        let starts = Arc::new(Mutex::new(Vec::new()));
        let mut start = with_fallback(InitialList::Streamed, ignoring(starts.clone()), || {});
        let mut watch = start();
        let began = tokio::time::Instant::now();
        let mut seen = Vec::new();
        while !matches!(seen.last(), Some(Ok(watcher::Event::InitDone))) {
            seen.push(watch.next().await.expect("the watch goes on"));
        }
        assert_eq!(began.elapsed(), INITIAL_EVENTS_DEADLINE);
        assert_eq!(
            *starts.lock().unwrap(),
            [InitialList::Streamed, InitialList::Paged]
        );
        let applied: Vec<_> = (seen.iter())
            .filter_map(|e| match e {
                Ok(watcher::Event::InitApply(o)) => Some(*o),
                _ => None,
            })
            .collect();
        assert_eq!(
            applied,
            [7, 1],
            "the paged list starts over and ends the first"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_ends_its_initial_events_is_kept_past_the_deadline() {
        let starts = Arc::new(Mutex::new(Vec::new()));
        let recorded = starts.clone();
        let streaming = move |how| {
            recorded.lock().unwrap().push(how);
            let events = [watcher::Event::<u32>::Init, watcher::Event::InitDone].map(Ok);
            stream::iter(events).chain(stream::pending()).boxed()
        };
        let mut watch = with_fallback(InitialList::Streamed, streaming, || {})();
        let _ = watch.next().await;
        let _ = watch.next().await;
        let later = tokio::time::timeout(INITIAL_EVENTS_DEADLINE * 2, watch.next()).await;
        assert!(later.is_err(), "nothing more: {later:?}");
        assert_eq!(*starts.lock().unwrap(), [InitialList::Streamed]);
    }

    #[test]
    fn only_a_streamed_watch_can_be_refused_and_only_at_its_start() {
        let refusal = watcher::Error::WatchStartFailed(api_error(422));
        assert!(InitialList::Streamed.refused_by(&refusal));
        assert!(!InitialList::Paged.refused_by(&refusal));
        let later = watcher::Error::WatchFailed(api_error(422));
        assert!(!InitialList::Streamed.refused_by(&later));
        let list = watcher::Error::InitialListFailed(api_error(422));
        assert!(!InitialList::Streamed.refused_by(&list));
    }
}
