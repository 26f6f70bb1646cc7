use std::time::Duration;

use tower::{Layer as _, ServiceExt as _, util::BoxCloneService};

use super::*;
use rstest::rstest;

/// A member stand-in whose answers have bodies of type `B`.
type Member<B> = BoxCloneService<http::Request<()>, http::Response<B>, BoxError>;

#[rstest]
#[case::get("/readyz", false)]
#[case::list("/api/v1/nodes?limit=500", false)]
#[case::watch("/api/v1/nodes?watch=true&resourceVersion=5", true)]
#[case::watch_1("/api/v1/nodes?resourceVersion=5&watch=1", true)]
#[case::not_a_watch("/api/v1/nodes?watch=false", false)]
#[case::lookalike("/api/v1/nodes?xwatch=true", false)]
fn only_watches_are_exempt(#[case] uri: &str, #[case] watch: bool) {
    assert_eq!(is_watch(&uri.parse().unwrap()), watch);
}

/// Answers after the delay its path names (`/after/<ms>`), or never (any other path), like a
/// frozen apiserver.
fn delayed() -> Member<()> {
    Member::new(tower::service_fn(|req: http::Request<()>| {
        let delay = req
            .uri()
            .path()
            .strip_prefix("/after/")
            .and_then(|ms| ms.parse().ok())
            .map(Duration::from_millis);
        async move {
            match delay {
                Some(delay) => tokio::time::sleep(delay).await,
                None => std::future::pending().await,
            }
            Ok(http::Response::new(()))
        }
    }))
}

fn get(path: &str) -> http::Request<()> {
    http::Request::get(path).body(()).unwrap()
}

/// A request without an answer fails late by at most a tenth of the deadline, never early.
#[tokio::test(start_paused = true)]
async fn a_request_fails_within_a_tick_after_its_deadline() {
    let service = RequestDeadlineLayer::new(Duration::from_secs(5)).layer(delayed());
    let started = tokio::time::Instant::now();
    let err = service.oneshot(get("/never")).await.unwrap_err();
    let waited = started.elapsed();
    assert!(err.downcast_ref::<DeadlineExceeded>().is_some(), "{err}");
    let window = Duration::from_secs(5)..=Duration::from_millis(5500);
    assert!(window.contains(&waited), "failed after {waited:?}");
}

/// Of requests sharing one clock, only those without an answer in time fail, and nothing
/// stays behind: no registration and, once nothing waits, no ticker.
#[tokio::test(start_paused = true)]
async fn only_late_requests_fail_and_nothing_stays_behind() {
    let service = RequestDeadlineLayer::new(Duration::from_secs(2)).layer(delayed());
    let paths = [
        "/after/10",
        "/never",
        "/after/1900",
        "/after/2600",
        "/never",
    ];
    let results =
        futures::future::join_all(paths.iter().map(|path| service.clone().oneshot(get(path))))
            .await;
    let late: Vec<bool> = results
        .iter()
        .map(|r| r.as_ref().err().is_some_and(|e| e.is::<DeadlineExceeded>()))
        .collect();
    assert_eq!(late, [false, true, false, true, true]);
    assert_eq!(service.pending.len(), 0);
    // The ticker notices on its next tick that nothing waits.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!service.pending.ticking());

    // Answered ones leave nothing either, and a new request starts the clock again.
    for _ in 0..100 {
        service.clone().oneshot(get("/after/1")).await.unwrap();
    }
    assert_eq!(service.pending.len(), 0);
    let err = service.clone().oneshot(get("/never")).await.unwrap_err();
    assert!(err.is::<DeadlineExceeded>(), "{err}");
}

/// A caller that gives up takes its request out of the pending set.
#[tokio::test(start_paused = true)]
async fn a_dropped_request_is_forgotten() {
    let service = RequestDeadlineLayer::new(Duration::from_secs(5)).layer(delayed());
    let gave_up = tokio::time::timeout(
        Duration::from_secs(1),
        service.clone().oneshot(get("/never")),
    );
    assert!(gave_up.await.is_err());
    assert_eq!(service.pending.len(), 0);
}

/// The ticker lives on the runtime of the request that started it. A client kept past that
/// runtime's end still holds every request to its deadline on the next runtime.
#[test]
fn the_clock_outlives_the_runtime_that_started_it() {
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    };
    let service = RequestDeadlineLayer::new(Duration::from_secs(1)).layer(delayed());
    let first = runtime();
    first.block_on(async {
        // Started, then abandoned with the runtime while its ticker sleeps.
        let waiting = tokio::spawn(service.clone().oneshot(get("/never")));
        tokio::task::yield_now().await;
        assert!(service.pending.ticking());
        drop(waiting);
    });
    drop(first);
    runtime().block_on(async {
        let err = tokio::time::timeout(
            Duration::from_secs(60),
            service.clone().oneshot(get("/never")),
        )
        .await
        .expect("the request waited past its deadline")
        .unwrap_err();
        assert!(err.is::<DeadlineExceeded>(), "{err}");
    });
}

/// A ticker held up (a runtime thread blocked for longer than the deadline) does not count the
/// time it missed against requests that start after it: they fail late, never early.
#[tokio::test(flavor = "current_thread")]
async fn a_lagging_clock_never_fails_a_request_early() {
    let service = RequestDeadlineLayer::new(Duration::from_millis(200)).layer(delayed());
    let keeps_ticking = tokio::spawn(service.clone().oneshot(get("/never")));
    tokio::task::yield_now().await;
    assert!(service.pending.ticking());
    // NB: blocks the only runtime thread on purpose, so that the ticker misses its ticks.
    std::thread::sleep(Duration::from_millis(600));
    let answered = service.clone().oneshot(get("/after/150")).await;
    assert!(answered.is_ok(), "failed before its deadline: {answered:?}");
    assert!(keeps_ticking.await.unwrap().is_err());
}

/// A body that never yields a frame.
type Stalled = http_body_util::StreamBody<
    futures::stream::Pending<Result<http_body::Frame<bytes::Bytes>, BoxError>>,
>;

/// Answers at once with a body that never ends, like a member trickling nothing after its
/// headers.
fn stalled_body() -> Member<Stalled> {
    Member::new(tower::service_fn(|_req: http::Request<()>| {
        std::future::ready(Ok(http::Response::new(Stalled::new(
            futures::stream::pending(),
        ))))
    }))
}

#[tokio::test(start_paused = true)]
async fn a_body_that_does_not_arrive_fails_at_the_deadline() {
    use http_body_util::BodyExt as _;
    let service = RequestDeadlineLayer::new(Duration::from_secs(5)).layer(stalled_body());
    let request = http::Request::get("/version").body(()).unwrap();
    let response = service.oneshot(request).await.unwrap();
    let err = response.into_body().collect().await.unwrap_err();
    assert_eq!(
        crate::LimitExceeded::find_in(err.as_ref()),
        Some(&crate::LimitExceeded::ResponseTooSlow {
            deadline: Duration::from_secs(5)
        }),
        "{err}"
    );
}

/// A watch may wait for its headers, and then for its body, as long as it likes.
#[rstest]
#[case::headers(Member::new(delayed().map_response(|_| http::Response::new(Stalled::new(futures::stream::pending())))))]
#[case::body(stalled_body())]
#[tokio::test(start_paused = true)]
async fn a_watch_may_stay_open(#[case] inner: Member<Stalled>) {
    use http_body_util::BodyExt as _;
    let service = RequestDeadlineLayer::new(Duration::from_secs(5)).layer(inner);
    let request = http::Request::get("/api/v1/nodes?watch=true")
        .body(())
        .unwrap();
    let read = async { service.oneshot(request).await?.into_body().collect().await };
    let waited = tokio::time::timeout(Duration::from_secs(3600), read);
    assert!(waited.await.is_err(), "the watch was cut off");
}
