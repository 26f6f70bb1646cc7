use std::convert::Infallible;

use http_body_util::{BodyExt as _, StreamBody};
use rstest::rstest;
use tower::ServiceExt as _;

use super::*;

const LIMITS: ResponseLimits = ResponseLimits {
    response_bytes: 1_000,
    watch_line_bytes: 100,
    list_pages: 3,
};

type Chunks =
    StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// Answers every request with `chunks`, one frame each.
fn answering(
    chunks: Vec<Vec<u8>>,
) -> impl Service<
    http::Request<()>,
    Response = http::Response<Chunks>,
    Error = Infallible,
    Future = std::future::Ready<Result<http::Response<Chunks>, Infallible>>,
> + Clone {
    tower::service_fn(move |_req: http::Request<()>| {
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = chunks
            .iter()
            .map(|chunk| Ok(Frame::data(Bytes::from(chunk.clone()))))
            .collect();
        std::future::ready(Ok(http::Response::new(StreamBody::new(
            futures::stream::iter(frames),
        ))))
    })
}

async fn read(uri: &str, chunks: Vec<Vec<u8>>) -> Result<usize, BoxError> {
    let service = ResponseLimit::new(answering(chunks), LIMITS);
    let request = http::Request::get(uri).body(()).unwrap();
    let response = service.oneshot(request).await?;
    Ok(response.into_body().collect().await?.to_bytes().len())
}

fn limit_of(err: &BoxError) -> LimitExceeded {
    LimitExceeded::find_in(err.as_ref())
        .cloned()
        .unwrap_or_else(|| panic!("not a limit: {err}"))
}

#[rstest]
#[case::readyz("/readyz", HEALTH_RESPONSE_BYTES, RequestKind::Health)]
#[case::version("/version", HEALTH_RESPONSE_BYTES, RequestKind::Health)]
#[case::list("/api/v1/nodes?limit=100", 1_000, RequestKind::Other)]
#[case::not_a_watch("/api/v1/nodes?watch=false", 1_000, RequestKind::Other)]
#[tokio::test]
async fn a_response_over_its_limit_fails(
    #[case] uri: &str,
    #[case] limit: u64,
    #[case] request: RequestKind,
) {
    let bytes = usize::try_from(limit).unwrap();
    assert_eq!(
        read(uri, vec![vec![b'x'; bytes / 2]; 2]).await.unwrap(),
        bytes
    );
    let err = read(uri, vec![vec![b'x'; bytes], vec![b'x']])
        .await
        .unwrap_err();
    let want = LimitExceeded::ResponseTooLarge { request, limit };
    assert_eq!(limit_of(&err), want);
}

#[tokio::test]
async fn a_watch_may_stream_for_ever_one_short_line_at_a_time() {
    let lines: Vec<Vec<u8>> = (0..1_000)
        .map(|_| [vec![b'x'; 99], vec![b'\n']].concat())
        .collect();
    let read = read("/api/v1/nodes?watch=true", lines).await.unwrap();
    assert_eq!(read, 100_000);
}

#[rstest]
#[case::one_frame(vec![vec![b'x'; 101]])]
#[case::across_frames(vec![vec![b'x'; 60], vec![b'x'; 41]])]
#[case::after_a_newline(vec![[vec![b'x'; 50], vec![b'\n'], vec![b'x'; 60]].concat(), vec![b'x'; 41]])]
#[case::before_a_newline(vec![vec![b'x'; 60], [vec![b'x'; 41], vec![b'\n']].concat()])]
#[tokio::test]
async fn a_watch_line_over_its_limit_fails(#[case] chunks: Vec<Vec<u8>>) {
    let err = read("/api/v1/nodes?watch=1", chunks).await.unwrap_err();
    let want = LimitExceeded::WatchLineTooLong { limit: 100 };
    assert_eq!(limit_of(&err), want);
}

#[tokio::test]
async fn a_list_that_keeps_continuing_fails_after_its_pages() {
    let service = ResponseLimit::new(answering(vec![b"{}".to_vec()]), LIMITS);
    let get = |uri: &str| {
        let request = http::Request::get(uri).body(()).unwrap();
        service.clone().oneshot(request)
    };
    get("/api/v1/nodes?limit=100").await.unwrap();
    for _ in 0..3 {
        get("/api/v1/nodes?limit=100&continue=abc").await.unwrap();
    }
    // Another path counts on its own.
    get("/apis/apps/v1/deployments?limit=100&continue=abc")
        .await
        .unwrap();
    let err = get("/api/v1/nodes?limit=100&continue=abc")
        .await
        .unwrap_err();
    assert_eq!(limit_of(&err), LimitExceeded::TooManyListPages { limit: 3 });
    // A new list starts counting again.
    get("/api/v1/nodes?limit=100").await.unwrap();
    get("/api/v1/nodes?limit=100&continue=abc").await.unwrap();
}

#[test]
fn a_limit_is_found_inside_the_io_error_a_watch_wraps_it_in() {
    let err = kube::Error::ReadEvents(std::io::Error::other(kube::Error::Service(Box::new(
        LimitExceeded::WatchLineTooLong { limit: 7 },
    ))));
    let found = LimitExceeded::find_in(&err).map(LimitExceeded::condition_reason);
    assert_eq!(found, Some("WatchLineTooLong"));
}
