//! A deadline for every request that is not a watch.
//!
//! kube leaves `read_timeout` unset so that watches can stay open, which also leaves every
//! other request without one: an apiserver that accepts the connection and then never answers
//! (a frozen process, a blackholed network) holds a list, a probe or a status write forever.
//! Watches are bounded separately, by the watcher's idle deadline.

mod pending;

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use tower::{Layer, Service};

use self::pending::{Pending, Registration};

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
    /// response headers, never sooner, and at most a tenth of it (and 1 s) later: deadlines
    /// are counted in ticks of one timer per service, not one timer per request.
    pub fn new(deadline: Duration) -> Self {
        Self { deadline }
    }
}

impl<S> Layer<S> for RequestDeadlineLayer {
    type Service = RequestDeadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestDeadline {
            inner,
            pending: Arc::new(Pending::new(self.deadline)),
        }
    }
}

/// Fails a request that is not a watch when its response headers do not arrive in time.
///
/// Clones share one clock: a single task per service, running only while requests wait,
/// fails the late ones. It runs on the Tokio runtime of the request that started it; a
/// request on another runtime, after that one has shut down, starts it again there.
#[derive(Clone, Debug)]
pub struct RequestDeadline<S> {
    inner: S,
    pending: Arc<Pending>,
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
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let clock = if is_watch(request.uri()) {
            Clock::Unbounded
        } else {
            Clock::Unstarted(Arc::clone(&self.pending))
        };
        DeadlineFuture {
            response: self.inner.call(request),
            clock,
        }
    }
}

pin_project_lite::pin_project! {
    /// Response future of [`RequestDeadline`].
    #[derive(Debug)]
    pub struct DeadlineFuture<F> {
        #[pin]
        response: F,
        clock: Clock,
    }
}

/// Where a request stands against its deadline.
#[derive(Debug)]
enum Clock {
    /// A watch: no deadline.
    Unbounded,
    /// Not polled yet: the clock starts when the response is first awaited.
    Unstarted(Arc<Pending>),
    Running(Registration),
}

impl<F, T, E> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(result) = this.response.poll(cx) {
            // Out of the pending set now, not when the caller drops the future.
            *this.clock = Clock::Unbounded;
            return Poll::Ready(result.map_err(Into::into));
        }
        match std::mem::replace(this.clock, Clock::Unbounded) {
            Clock::Unbounded => Poll::Pending,
            Clock::Unstarted(pending) => {
                *this.clock = Clock::Running(pending.register(cx.waker()));
                Poll::Pending
            }
            Clock::Running(registration) => {
                if registration.expired(cx.waker()) {
                    return Poll::Ready(Err(Box::new(DeadlineExceeded(registration.deadline()))));
                }
                *this.clock = Clock::Running(registration);
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests;
