//! A copy of a request to send again: after a 401 with a fresh credential, or after a
//! 429/503/504.

use http::Request;
use kube::client::Body;

/// A copy of `request` (method, URI, version, headers, extensions, body), or `None` if its
/// body streams and so cannot be sent twice.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every part of the request the member sees; kube builds no streaming bodies for its
    /// requests, and offers no way to make one here.
    #[tokio::test]
    async fn a_copy_keeps_every_part() {
        let mut request = Request::builder()
            .method(http::Method::PATCH)
            .uri("https://member.example:6443/api/v1/namespaces/a/configmaps/b?fieldManager=t")
            .version(http::Version::HTTP_11)
            .header("content-type", "application/merge-patch+json")
            .header("accept", "application/json")
            .header("accept", "application/yaml")
            .body(Body::from(b"{\"data\":{}}".to_vec()))
            .unwrap();
        request.extensions_mut().insert(7_u32);

        let copy = replayable(&request).unwrap();
        assert_eq!(copy.method(), request.method());
        assert_eq!(copy.uri(), request.uri());
        assert_eq!(copy.version(), request.version());
        assert_eq!(copy.headers(), request.headers());
        assert_eq!(copy.extensions().get::<u32>(), Some(&7));
        assert_eq!(
            copy.into_body().collect_bytes().await.unwrap(),
            request.into_body().collect_bytes().await.unwrap()
        );
    }
}
