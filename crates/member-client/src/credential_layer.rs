//! Attach the member's current bearer token to every request; on 401 refresh it and retry once.
//!
//! ```no_run
//! # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
//! use member_client::{credential_layer::CredentialLayer, CredentialHealth, file_source::FileSource, CredentialCache, CredentialCacheConfig};
//! use tower::buffer::BufferLayer;
//!
//! let source = FileSource::new("/var/run/secrets/kubernetes.io/serviceaccount/token");
//! let secret = source.secret_ref();
//! let tokens = CredentialCache::new(source, CredentialCacheConfig::default());
//! let config = kube::Config::new("https://127.0.0.1:6443".parse()?);
//! let client = kube::client::ClientBuilder::try_from(config)?
//!     // The retry needs a second call on the inner service, so it must be `Clone`.
//!     .with_layer(&BufferLayer::new(1024))
//!     .with_layer(&CredentialLayer::new("self", secret, tokens, CredentialHealth::new()))
//!     .build();
//! # Ok(()) }
//! ```
//! [`ClientFactory`](crate::ClientFactory) builds this stack without the buffer (the stack it
//! rebuilds below is cloneable), with tower's `ConcurrencyLimitLayer` and a
//! [`RequestDeadlineLayer`](crate::RequestDeadlineLayer) under the bearer layer: a request
//! takes its place under the limit once its credential is known, so one waiting for a fetch
//! holds none.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use http::{Request, Response, StatusCode, header::AUTHORIZATION};
use kube::client::Body;
use tower::{BoxError, Layer, Service, ServiceExt as _};

use crate::{
    ClientIdentity, Credential, CredentialCache, CredentialHealth, CredentialKey, CredentialState,
    Error, credential_cache::CredentialSlot,
};

/// Wraps a service in [`Bearer`]. Holds only handles, so it is cheap to clone.
#[derive(Clone, Debug)]
pub struct CredentialLayer {
    ctx: Arc<Ctx>,
}

#[derive(Debug)]
struct Ctx {
    member: String,
    secret: CredentialKey,
    tokens: CredentialCache,
    /// This client's copy of its cache entry: see [`CredentialSlot`].
    slot: CredentialSlot,
    health: CredentialHealth,
    /// How long after a request is first sent its 429/503/504 may still be retried; `None`:
    /// never (kube's own retry layer below does it).
    server_retries: Option<Duration>,
}

impl CredentialLayer {
    /// Requests for `member` carry the token cached under `secret`; what the member says of it
    /// is reported to `health`.
    pub fn new(
        member: impl Into<String>,
        secret: CredentialKey,
        tokens: CredentialCache,
        health: CredentialHealth,
    ) -> Self {
        Self {
            ctx: Arc::new(Ctx {
                member: member.into(),
                secret,
                tokens,
                slot: CredentialSlot::default(),
                health,
                server_retries: None,
            }),
        }
    }

    /// Also retries a 429, 503 or 504 as kube's default client does
    /// ([`RetryPolicy::server_retry`](kube::client::retry::RetryPolicy::server_retry): backoff,
    /// `Retry-After`), with the copy of the request that the 401 retry keeps, for as long as a
    /// retry starts within `budget` of the first such answer. Past that the member's answer is returned as it is, so that a member that
    /// keeps answering 503, or asks to be retried in a year, holds no request longer. For a
    /// stack without kube's retry layer, as [`ClientFactory`](crate::ClientFactory) builds it.
    #[must_use]
    pub fn with_server_retries(mut self, budget: Duration) -> Self {
        if let Some(ctx) = Arc::get_mut(&mut self.ctx) {
            ctx.server_retries = Some(budget);
        }
        self
    }
}

impl<S> Layer<S> for CredentialLayer {
    type Service = Bearer<S>;

    fn layer(&self, inner: S) -> Bearer<S> {
        Bearer {
            inner,
            ctx: self.ctx.clone(),
        }
    }
}

/// Sets `Authorization: Bearer …` (marked sensitive) from the [`CredentialCache`] on each request.
///
/// # Recovery
/// On a 401 the cached token is invalidated if it is still the one that was rejected, and read
/// again (one fetch, however many requests were rejected at once). If the token changed, the
/// request is sent once more with it; request bodies built by kube can always be replayed (a
/// streaming body cannot, and its 401 is passed through: the next request carries the fresh
/// token). If the token did not change, or the retry is rejected too, the request fails with
/// [`Error::Unauthorized`] and the member's state becomes [`CredentialState::Unauthorized`]. There is
/// never a second retry.
///
/// A 2xx makes the state [`CredentialState::Valid`]. Other statuses (403, 404, 5xx) and
/// transport errors pass through untouched and change nothing.
#[derive(Clone, Debug)]
pub struct Bearer<S> {
    inner: S,
    ctx: Arc<Ctx>,
}

impl<S> Bearer<S> {
    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B> Service<Request<Body>> for Bearer<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = ResponseFuture<B>;

    /// Always ready: the inner service is readied inside the response future, once the token is
    /// known. NB: readying it here would make a request that waits for a token fetch hold a slot
    /// of the inner buffer, and a slow Secret read would then block unrelated requests.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        ResponseFuture {
            inner: Box::pin(send(self.ctx.clone(), self.inner.clone(), request)),
        }
    }
}

/// Response future of [`Bearer`].
pub struct ResponseFuture<B> {
    inner: Pin<Box<dyn Future<Output = Result<Response<B>, BoxError>> + Send>>,
}

impl<B> Future for ResponseFuture<B> {
    type Output = Result<Response<B>, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<B> fmt::Debug for ResponseFuture<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

/// The request's future. NB: its steps are written out in one `async move` block, not an
/// `async fn` calling another: an async fn keeps its arguments twice (as passed, and moved
/// in), and each copy of a request is a quarter of a kilobyte in a future that every request
/// allocates.
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn would hold the request twice"
)]
fn send<S, B>(
    ctx: Arc<Ctx>,
    mut inner: S,
    request: Request<Body>,
) -> impl Future<Output = Result<Response<B>, BoxError>> + Send + 'static
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
{
    async move {
        let credential = ctx.credential().await?;
        let replay = replayable(&request);
        let ready = inner.ready().await.map_err(Into::into)?;
        let sending = ready.call(authorize(request, &credential));
        let response = sending.await.map_err(Into::into)?;
        let status = response.status();
        let retried = status == StatusCode::UNAUTHORIZED
            || (ctx.server_retries.is_some() && RETRIED_STATUSES.contains(&status));
        if !retried {
            ctx.observe(status);
            return Ok(response);
        }
        // NB: boxed, so that what only a retry needs is not in every request's future (and
        // bound first: a temporary in an awaited expression would keep its place in it).
        let retrying = Box::pin(retry::retry(ctx, inner, replay, response, credential));
        retrying.await
    }
}

/// What kube's server retries retry
/// ([`RetryPolicy::server_retry`](kube::client::retry::RetryPolicy::server_retry)).
const RETRIED_STATUSES: [StatusCode; 3] = [
    StatusCode::TOO_MANY_REQUESTS,
    StatusCode::SERVICE_UNAVAILABLE,
    StatusCode::GATEWAY_TIMEOUT,
];

impl Ctx {
    /// The credential to send: the slot's copy, or the cache's.
    ///
    /// NB: the cache's read is boxed: its state is most of a request future's size, which a
    /// request whose credential is in the slot (nearly all) would otherwise allocate and move.
    async fn credential(&self) -> Result<Arc<Credential>, BoxError> {
        let credential = match self.tokens.held(&self.slot) {
            Some(held) => Ok(held),
            None => {
                let read = Box::pin(self.tokens.get_via(&self.slot, &self.secret));
                read.await
            }
        };
        if let Ok(credential) = &credential {
            self.health.using(credential);
        }
        credential.map_err(|source| {
            let changed = self.health.report(CredentialState::Unavailable {
                reason: source.to_string(),
            });
            if changed {
                tracing::warn!(member = %self.member, secret = %self.secret, error = %source, "no usable credential");
            }
            Box::new(Error::CredentialUnavailable {
                member: self.member.clone(),
                secret: self.secret.clone(),
                source,
            }) as BoxError
        })
    }

    /// The credential after `rejected` was: the cache's entry dropped if it still holds it.
    async fn refresh(&self, rejected: &Credential) -> Result<Arc<Credential>, BoxError> {
        // The slot's copy may be what was rejected, even where the cache already holds a
        // newer entry.
        self.slot.clear();
        self.tokens
            .invalidate_if_current(&self.secret, rejected)
            .await;
        self.credential().await
    }

    fn observe(&self, status: StatusCode) {
        if status.is_success() {
            self.health.report(CredentialState::Valid);
        }
    }

    fn rejected(&self) -> BoxError {
        if self.health.report(CredentialState::Unauthorized) {
            tracing::warn!(
                member = %self.member,
                secret = %self.secret,
                "member rejects its credential (401) after a refresh; update the Secret"
            );
        }
        Box::new(Error::Unauthorized {
            member: self.member.clone(),
            secret: self.secret.clone(),
        })
    }
}

/// A copy of `request` (method, URI, version, headers, extensions, body) to send again after
/// a 401 or a 429/503/504, or `None` if its body streams and so cannot be sent twice.
///
/// NB: kube's `RetryPolicy::clone_request` builds the copy's header map entry by entry from a
/// clone of the original; cloning the map once is half the allocations, on every request.
pub(crate) fn replayable(request: &Request<Body>) -> Option<Request<Body>> {
    let body = request.body().try_clone()?;
    let mut copy = Request::new(body);
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    *copy.extensions_mut() = request.extensions().clone();
    Some(copy)
}

/// Puts the credential on the request: the token in `Authorization`, the client identity in
/// an extension that the transport reads to pick connections made with it.
fn authorize(mut request: Request<Body>, credential: &Credential) -> Request<Body> {
    // A replay carries what the rejected credential put there; nothing of it may stay.
    match credential.authorization() {
        Some(authorization) => request
            .headers_mut()
            .insert(AUTHORIZATION, authorization.clone()),
        None => request.headers_mut().remove(AUTHORIZATION),
    };
    match credential.identity() {
        Some(identity) => request.extensions_mut().insert(identity.clone()),
        None => request.extensions_mut().remove::<ClientIdentity>(),
    };
    request
}

mod retry;
#[cfg(test)]
mod tests;
