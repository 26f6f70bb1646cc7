//! A deadline for every request that is not a watch.
//!
//! kube leaves `read_timeout` unset so that watches can stay open, which also leaves every
//! other request without one: an apiserver that accepts the connection and then never answers
//! (a frozen process, a blackholed network) holds a list, a probe or a status write forever.
//! Watches are bounded separately, by the watcher's idle deadline.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tower::{Layer, Service};

/// The deadline a request did not meet. Classified as
/// [`FailureKind::Unreachable`](crate::FailureKind::Unreachable): the member did not answer.
#[derive(Debug, thiserror::Error)]
#[error("no response within {0:?}")]
pub struct DeadlineExceeded(pub Duration);

/// Applies [`RequestDeadline`] to a service.
///
/// ```
/// use std::time::Duration;
/// use member_client::RequestDeadlineLayer;
/// let layer = RequestDeadlineLayer::new(Duration::from_secs(10));
/// # let _ = layer;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RequestDeadlineLayer {
    deadline: Duration,
}

impl RequestDeadlineLayer {
    /// Requests that are not watches fail with [`DeadlineExceeded`] after `deadline` without
    /// response headers.
    pub fn new(deadline: Duration) -> Self {
        Self { deadline }
    }
}

impl<S> Layer<S> for RequestDeadlineLayer {
    type Service = RequestDeadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestDeadline {
            inner,
            deadline: self.deadline,
        }
    }
}

/// Fails a request that is not a watch when its response headers do not arrive in time.
#[derive(Clone, Debug)]
pub struct RequestDeadline<S> {
    inner: S,
    deadline: Duration,
}

/// Whether `uri` asks for a watch (`?watch=true`, `watch=1`), which may stay open for minutes.
fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    })
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B> Service<http::Request<B>> for RequestDeadline<S>
where
    S: Service<http::Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let deadline = (!is_watch(request.uri())).then_some(self.deadline);
        let response = self.inner.call(request);
        Box::pin(async move {
            match deadline {
                None => response.await.map_err(Into::into),
                Some(deadline) => match tokio::time::timeout(deadline, response).await {
                    Ok(result) => result.map_err(Into::into),
                    Err(_) => Err(Box::new(DeadlineExceeded(deadline)) as BoxError),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use tower::ServiceExt as _;

    type Answer = Pin<Box<dyn Future<Output = Result<http::Response<()>, BoxError>> + Send>>;

    /// A service that never answers, like a frozen apiserver.
    fn silent()
    -> impl Service<
        http::Request<()>,
        Response = http::Response<()>,
        Error = BoxError,
        Future = Answer,
    > + Clone {
        tower::service_fn(|_req: http::Request<()>| Box::pin(std::future::pending()) as Answer)
    }

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

    #[tokio::test(start_paused = true)]
    async fn a_request_without_answer_fails_at_the_deadline() {
        let service = RequestDeadlineLayer::new(Duration::from_secs(5)).layer(silent());
        let request = http::Request::get("/readyz").body(()).unwrap();
        let err = service.oneshot(request).await.unwrap_err();
        assert!(err.downcast_ref::<DeadlineExceeded>().is_some(), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_may_stay_open() {
        let service = RequestDeadlineLayer::new(Duration::from_secs(5)).layer(silent());
        let request = http::Request::get("/api/v1/nodes?watch=true")
            .body(())
            .unwrap();
        let waited = tokio::time::timeout(Duration::from_secs(3600), service.oneshot(request));
        assert!(waited.await.is_err(), "the watch was cut off");
    }
}
