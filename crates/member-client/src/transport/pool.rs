//! [`Pool`]: one client identity's connections to a member. HTTP/2 where the member offers it
//! by ALPN, so that one connection carries every watch, probe and request; otherwise hyper's
//! pool of HTTP/1.1 connections, one per request in flight.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use futures::{
    TryFutureExt as _,
    future::{BoxFuture, Either, MapErr, MapOk},
};
use http::{Request, Response, Uri, uri::Scheme};
use hyper::body::Incoming;
use hyper_util::client::legacy;
use kube::client::Body;
use tower::{BoxError, Service};

use super::{
    http2_connections::{Declined, Http2Connections, PoolBody},
    pool_recipe::{Connector, Dial},
};

/// A pool's response future: hyper's own for HTTP/1.1, unboxed, since it is most requests to
/// a member that declined `h2`; boxed for HTTP/2, whose send awaits a stream or a dial.
pub(crate) type PoolFuture =
    Either<Http1Future, BoxFuture<'static, Result<Response<PoolBody>, BoxError>>>;

type Http1Future = MapErr<
    MapOk<legacy::ResponseFuture, fn(Response<Incoming>) -> Response<PoolBody>>,
    fn(legacy::Error) -> BoxError,
>;

/// A member's connections for one client identity.
pub(crate) struct Pool<H: Dial> {
    http1: legacy::Client<Parked<Connector<H>>, Body>,
    /// Where a dial that came back without `h2` leaves its connection for `http1`.
    parked: Parked<Connector<H>>,
    http2: Option<Arc<Http2Connections<Connector<H>>>>,
}

impl<H: Dial> fmt::Debug for Pool<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("http2", &self.http2)
            .finish_non_exhaustive()
    }
}

impl<H: Dial> Pool<H> {
    /// A pool that dials `http1` (offering only HTTP/1.1) and, when given, `http2` (offering
    /// `h2` first).
    pub(crate) fn new(http1: Connector<H>, http2: Option<Http2Connections<Connector<H>>>) -> Self {
        let parked = Parked::new(http1);
        let client =
            legacy::Builder::new(hyper_util::rt::TokioExecutor::new()).build(parked.clone());
        Self {
            http1: client,
            parked,
            http2: http2.map(Arc::new),
        }
    }

    /// Sends `request`: over HTTP/2 when the member speaks it, the URI is `https` and the
    /// request asks for no protocol upgrade (which HTTP/2 has not); otherwise over HTTP/1.1.
    pub(crate) fn request(&self, request: Request<Body>) -> PoolFuture {
        let http2 = self.http2.as_ref().filter(|http2| {
            !http2.declined()
                && request.uri().scheme() == Some(&Scheme::HTTPS)
                && !request.headers().contains_key(http::header::UPGRADE)
        });
        let Some(http2) = http2.map(Arc::clone) else {
            return Either::Left(over_http1(&self.http1, request));
        };
        let (http1, parked) = (self.http1.clone(), self.parked.clone());
        Either::Right(Box::pin(async move {
            match http2.send(request).await? {
                Ok(response) => Ok(response),
                Err(Declined {
                    connection,
                    request,
                }) => {
                    tracing::debug!("the member did not negotiate HTTP/2; using HTTP/1.1");
                    if let Some(connection) = connection {
                        parked.park(connection);
                    }
                    over_http1(&http1, request).await
                }
            }
        }))
    }
}

fn over_http1<C>(client: &legacy::Client<C, Body>, request: Request<Body>) -> Http1Future
where
    C: legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let uncounted: fn(Response<Incoming>) -> Response<PoolBody> =
        |response| response.map(PoolBody::uncounted);
    let boxed: fn(legacy::Error) -> BoxError = BoxError::from;
    client.request(request).map_ok(uncounted).map_err(boxed)
}

/// A connector that hands out a parked connection, if there is one, before it dials: how the
/// connection whose ALPN said HTTP/1.1 serves the request it was dialled for.
pub(crate) struct Parked<C: Service<Uri>> {
    dial: C,
    slot: Arc<Mutex<Option<C::Response>>>,
}

impl<C: Service<Uri> + Clone> Clone for Parked<C> {
    fn clone(&self) -> Self {
        Self {
            dial: self.dial.clone(),
            slot: Arc::clone(&self.slot),
        }
    }
}

impl<C: Service<Uri>> Parked<C> {
    fn new(dial: C) -> Self {
        Self {
            dial,
            slot: Arc::new(Mutex::new(None)),
        }
    }

    fn park(&self, connection: C::Response) {
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(connection);
    }
}

impl<C> Service<Uri> for Parked<C>
where
    C: Service<Uri, Error: Into<BoxError>, Future: Send + 'static>,
    C::Response: Send + 'static,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.dial.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let parked = self
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match parked {
            Some(connection) => Box::pin(std::future::ready(Ok(connection))),
            None => {
                let dialling = self.dial.call(uri);
                Box::pin(async move { dialling.await.map_err(Into::into) })
            }
        }
    }
}
