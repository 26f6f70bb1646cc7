//! [`IdentityPools`]: the bottom of a member's stack, sending each request over a connection
//! whose TLS handshake presented the [`ClientIdentity`] in the request's extensions.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError, Weak},
    task::{Context, Poll},
};

use http::{Request, Response};
use kube::client::Body;
use tower::BoxError;

use super::{
    http2_connections::PoolBody,
    pool::{Pool, PoolFuture},
    pool_recipe::{Dial, PoolRecipe},
};
use crate::ClientIdentity;

/// Routes requests by the [`ClientIdentity`] they carry (`request.extensions().get()`).
///
/// A request with no identity goes over the pool of connections that present none, as every
/// request did before client identities. A request with identity X goes over a pool whose
/// connections all presented X: the current pool if X is its identity, otherwise a new pool,
/// which becomes the current one.
///
/// # Guarantees
/// - A connection made with one identity never carries a request with another, and TLS
///   sessions are never resumed across identities (each pool has its own session cache).
/// - A rotation closes nothing that is in use: requests and streams (watches) on the old pool
///   keep their connections until they end. The old pool's idle connections close when it is
///   dropped: at the rotation, or once the last request sent on it has its response headers.
/// - Nothing accumulates per rotation: the router keeps the current pool, and only a weak
///   handle to the one before it, which serves requests still carrying the old identity while
///   in-flight requests keep it alive.
///
/// Not promised: an old identity arriving once its pool is gone gets a new pool, which becomes
/// current; the next request with the newest identity makes that one current again. A stale
/// request costs handshakes, never a connection with the wrong certificate.
///
/// # Concurrent calls
/// Clones share the pools, through one `Arc`: the stack above is cloned for every request,
/// and a clone of hyper's client is a dozen reference counts that concurrent requests would
/// contend on. A call takes a lock only to look up (or swap in) the pool of an identity;
/// making a pool is cheap (no I/O: the TLS roots were loaded once) and nothing awaits under
/// the lock.
pub(crate) struct IdentityPools<H: Dial> {
    shared: Arc<Shared<H>>,
}

struct Shared<H: Dial> {
    recipe: PoolRecipe<H>,
    anonymous: Pool<H>,
    slots: Mutex<Slots<H>>,
}

/// A pool and the identity all its connections presented.
struct IdentityPool<H: Dial> {
    identity: ClientIdentity,
    pool: Pool<H>,
}

struct Slots<H: Dial> {
    current: Option<Arc<IdentityPool<H>>>,
    /// The pool `current` replaced, alive only while requests hold it.
    previous: Weak<IdentityPool<H>>,
}

impl<H: Dial> Shared<H> {
    fn slots(&self) -> MutexGuard<'_, Slots<H>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<H: Dial> Clone for IdentityPools<H> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<H: Dial> fmt::Debug for IdentityPools<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slots = self.shared.slots();
        f.debug_struct("IdentityPools")
            .field("recipe", &self.shared.recipe)
            .field("current", &slots.current.as_ref().map(|p| &p.identity))
            .finish_non_exhaustive()
    }
}

impl<H: Dial> IdentityPools<H> {
    pub(crate) fn new(recipe: PoolRecipe<H>) -> Self {
        Self {
            shared: Arc::new(Shared {
                anonymous: recipe.pool(None),
                recipe,
                slots: Mutex::new(Slots {
                    current: None,
                    previous: Weak::new(),
                }),
            }),
        }
    }

    /// The pool for `identity`, made current if it is not the current one's.
    fn pool_for(&self, identity: &ClientIdentity) -> Arc<IdentityPool<H>> {
        let mut slots = self.shared.slots();
        if let Some(current) = &slots.current
            && current.identity.same_as(identity)
        {
            return Arc::clone(current);
        }
        // A request that read the old identity before the rotation (queued behind the
        // in-flight limit, say): keep it on the old pool rather than swap back and forth.
        if let Some(previous) = slots.previous.upgrade()
            && previous.identity.same_as(identity)
        {
            return previous;
        }
        let fresh = Arc::new(IdentityPool {
            identity: identity.clone(),
            pool: self.shared.recipe.pool(Some(identity)),
        });
        let replaced = slots.current.replace(Arc::clone(&fresh));
        slots.previous = replaced.as_ref().map(Arc::downgrade).unwrap_or_default();
        drop(slots);
        tracing::debug!(subject = %identity.subject(), "new connection pool for a client identity");
        // Dropped unlocked; its idle connections close once no request holds it.
        drop(replaced);
        fresh
    }

    /// What the router holds (tests).
    #[cfg(test)]
    pub(crate) fn slots(&self) -> SlotsView {
        let slots = self.shared.slots();
        SlotsView {
            current: slots.current.as_ref().map(|p| p.identity.clone()),
            current_pool: slots.current.as_ref().map(Arc::as_ptr).map(|p| p as usize),
            previous_alive: slots.previous.strong_count() > 0,
        }
    }
}

/// What [`IdentityPools`] holds, for tests.
#[cfg(test)]
pub(crate) struct SlotsView {
    /// The current pool's identity.
    pub(crate) current: Option<ClientIdentity>,
    /// Which pool is current (its address).
    pub(crate) current_pool: Option<usize>,
    /// Whether the pool that `current` replaced is still alive.
    pub(crate) previous_alive: bool,
}

impl<H> tower::Service<Request<Body>> for IdentityPools<H>
where
    H: Dial,
{
    type Response = Response<PoolBody>;
    type Error = BoxError;
    type Future = ResponseFuture<H>;

    /// Always ready, like hyper's pooled client.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        match request.extensions().get::<ClientIdentity>() {
            None => ResponseFuture {
                inner: self.shared.anonymous.request(request),
                held: None,
            },
            Some(identity) => {
                let pool = self.pool_for(identity);
                ResponseFuture {
                    inner: pool.pool.request(request),
                    held: Some(pool),
                }
            }
        }
    }
}

/// Response future of [`IdentityPools`]: the pool's, holding the pool it was sent on until the
/// response headers arrive (which is what keeps an old pool reachable for stale requests).
pub(crate) struct ResponseFuture<H: Dial> {
    inner: PoolFuture,
    held: Option<Arc<IdentityPool<H>>>,
}

impl<H: Dial> Future for ResponseFuture<H> {
    type Output = Result<Response<PoolBody>, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let output = Pin::new(&mut self.inner).poll(cx);
        if output.is_ready() {
            self.held = None;
        }
        output
    }
}

impl<H: Dial> fmt::Debug for ResponseFuture<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
