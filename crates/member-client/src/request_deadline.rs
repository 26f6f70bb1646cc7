//! A deadline for every request that is not a watch, for its response headers and then again
//! for its body.
//!
//! kube leaves `read_timeout` unset so that watches can stay open, which also leaves every
//! other request without one: an apiserver that accepts the connection and then never answers
//! (a frozen process, a blackholed network) holds a list, a probe or a status write forever,
//! and one that sends headers and then a byte a second holds it just as long. Watches are
//! bounded separately, by the watcher's idle deadline.

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
/// use member_client::request_deadline::RequestDeadlineLayer;
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

/// Fails a request that is not a watch when its response headers do not arrive in time, and
/// its body when that does not arrive within the same deadline again, counted from when it is
/// first read ([`LimitExceeded::ResponseTooSlow`](crate::LimitExceeded::ResponseTooSlow)).
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

impl<S, B, RB> Service<http::Request<B>> for RequestDeadline<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Error: Into<BoxError>,
{
    type Response = http::Response<DeadlineBody<RB>>;
    type Error = BoxError;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let body_clock = (!is_watch(request.uri())).then(|| Arc::clone(&self.pending));
        let clock = match &body_clock {
            None => Clock::Unbounded,
            Some(pending) => Clock::Unstarted(Arc::clone(pending)),
        };
        DeadlineFuture {
            response: self.inner.call(request),
            clock,
            body_clock,
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
        // The body's clock, started when it is first read; `None` for a watch.
        body_clock: Option<Arc<Pending>>,
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

impl Clock {
    /// `Ready(deadline)` once the deadline has passed (the clock is then unbounded), else
    /// `Pending` with `cx`'s waker registered; an unstarted clock starts here.
    fn poll_expired(&mut self, cx: &Context<'_>) -> Poll<Duration> {
        match std::mem::replace(self, Clock::Unbounded) {
            Clock::Unbounded => Poll::Pending,
            Clock::Unstarted(pending) => {
                *self = Clock::Running(pending.register(cx.waker()));
                Poll::Pending
            }
            Clock::Running(registration) => {
                if registration.expired(cx.waker()) {
                    return Poll::Ready(registration.deadline());
                }
                *self = Clock::Running(registration);
                Poll::Pending
            }
        }
    }
}

impl<F, RB, E> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<http::Response<RB>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<http::Response<DeadlineBody<RB>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(result) = this.response.poll(cx) {
            // Out of the pending set now, not when the caller drops the future.
            *this.clock = Clock::Unbounded;
            let body_clock = this.body_clock.take();
            return Poll::Ready(result.map_err(Into::into).map(|response| {
                response.map(|inner| DeadlineBody {
                    inner,
                    clock: match body_clock {
                        None => Clock::Unbounded,
                        Some(pending) => Clock::Unstarted(pending),
                    },
                })
            }));
        }
        this.clock
            .poll_expired(cx)
            .map(|deadline| Err(Box::new(DeadlineExceeded(deadline)) as BoxError))
    }
}

pin_project_lite::pin_project! {
    /// Response body of [`RequestDeadline`]: fails with
    /// [`LimitExceeded::ResponseTooSlow`](crate::LimitExceeded::ResponseTooSlow) when it is not
    /// over within the deadline from its first read.
    #[derive(Debug)]
    pub struct DeadlineBody<B> {
        #[pin]
        inner: B,
        clock: Clock,
    }
}

impl<B> http_body::Body for DeadlineBody<B>
where
    B: http_body::Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, BoxError>>> {
        let this = self.project();
        if let Poll::Ready(frame) = this.inner.poll_frame(cx) {
            if frame.is_none() {
                *this.clock = Clock::Unbounded;
            }
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        this.clock.poll_expired(cx).map(|deadline| {
            Some(Err(
                Box::new(crate::LimitExceeded::ResponseTooSlow { deadline }) as BoxError,
            ))
        })
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests;
