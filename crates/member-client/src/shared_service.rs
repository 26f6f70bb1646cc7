//! A cloneable handle to one service, so the bearer layer can call kube's stack a second time.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use tower::Service;

/// Shares one inner service between clones; each call locks it only for `poll_ready` + `call`.
///
/// kube's default stack is a `BoxService`, which is not `Clone`, and the retry after a 401 needs
/// a second call. `tower::buffer` would do, but it adds a channel hop and a worker task per member
/// to every request (measured at about 30 µs on a 130 µs loopback GET). Here the lock is held
/// only while readying and calling (no `.await` under it); the response future runs unlocked.
pub(crate) struct SharedService<S> {
    inner: Arc<Mutex<S>>,
}

impl<S> SharedService<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner: Arc::new(Mutex::new(inner)),
        }
    }
}

impl<S> Clone for SharedService<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<S, Req> Service<Req> for SharedService<S>
where
    S: Service<Req>,
    S::Future: Unpin,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = SharedFuture<S, Req>;

    /// Always ready: readiness of the shared service is checked under the lock, together with
    /// the call, so that no other clone can use up what one clone readied.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Req) -> Self::Future {
        SharedFuture {
            state: State::Waiting {
                service: self.inner.clone(),
                request: Some(request),
            },
        }
    }
}

/// Response future of [`SharedService`].
pub(crate) struct SharedFuture<S: Service<Req>, Req> {
    state: State<S, Req>,
}

enum State<S: Service<Req>, Req> {
    /// Next poll locks the service, readies it and calls it.
    Waiting {
        service: Arc<Mutex<S>>,
        request: Option<Req>,
    },
    /// Next poll drives the inner response future, unlocked.
    Calling(S::Future),
}

impl<S, Req> Unpin for SharedFuture<S, Req> where S: Service<Req, Future: Unpin> {}

impl<S, Req> Future for SharedFuture<S, Req>
where
    S: Service<Req>,
    S::Future: Unpin,
{
    type Output = Result<S::Response, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match &mut self.state {
                State::Waiting { service, request } => {
                    let future = {
                        // A panic in another caller's poll_ready/call leaves the service as
                        // usable as kube's own stack would be; don't turn it into a second panic.
                        let mut service = service.lock().unwrap_or_else(PoisonError::into_inner);
                        match service.poll_ready(cx) {
                            Poll::Pending => {
                                // NB: a shared service keeps only the last waker it was given,
                                // so wake ourselves rather than risk a lost wake-up. kube's
                                // default stack is always ready (hyper's pooled client is), so
                                // this does not spin in practice.
                                cx.waker().wake_by_ref();
                                return Poll::Pending;
                            }
                            Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                            Poll::Ready(Ok(())) => {
                                let Some(request) = request.take() else {
                                    // Unreachable: the request is taken exactly once, right
                                    // before leaving this state.
                                    return Poll::Pending;
                                };
                                service.call(request)
                            }
                        }
                    };
                    self.state = State::Calling(future);
                }
                State::Calling(future) => return Pin::new(future).poll(cx),
            }
        }
    }
}
