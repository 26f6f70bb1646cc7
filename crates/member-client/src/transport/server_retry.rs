//! [`ServerRetry`]: kube's retries of 429/503/504, with a cheaper copy of each request.

use http::{Request, Response};
use kube::client::{Body, retry::RetryPolicy};
use tower::{BoxError, retry::Policy};

use crate::credential_layer::replayable;

/// kube's [`RetryPolicy::server_retry`] (backoff, `Retry-After`, attempts), deciding every
/// retry; only the copy of the request kept for one is made by [`replayable`].
///
/// NB: the retry layer copies every request before it is sent, and below the bearer layer the
/// request carries its `Authorization` header: kube's copy rebuilds the header map entry by
/// entry, which was a measurable part of a loopback GET.
#[derive(Clone)]
pub(super) struct ServerRetry(RetryPolicy);

impl ServerRetry {
    pub(super) fn new() -> Self {
        Self(RetryPolicy::server_retry())
    }
}

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for ServerRetry {
    type Future = <RetryPolicy as Policy<Request<Body>, Response<Res>, BoxError>>::Future;

    fn retry(
        &mut self,
        request: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        self.0.retry(request, result)
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        replayable(request)
    }
}
