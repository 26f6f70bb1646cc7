//! [`GuardedResolver`]: the DNS step of every member connection, judged by the
//! [`EndpointPolicy`] before anything is dialled.
//!
//! A host name in a member definition passes the literal checks and may still resolve to
//! `169.254.169.254` or `127.0.0.1` (or start to, later: DNS rebinding). Checking the answer
//! inside the connector, rather than resolving once up front, judges exactly the addresses
//! that each connection would dial.

use std::{
    fmt,
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use hyper_util::client::legacy::connect::dns::Name;

use crate::validation::EndpointPolicy;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Addrs = std::vec::IntoIter<SocketAddr>;
type LookupFuture = Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>>;

/// How a name becomes addresses: the system resolver, or a stub in tests.
pub(crate) type Lookup = Arc<dyn Fn(String) -> LookupFuture + Send + Sync>;

/// The system resolver (`getaddrinfo`, through Tokio).
pub(crate) fn system_lookup() -> Lookup {
    Arc::new(|name: String| {
        Box::pin(async move { Ok(tokio::net::lookup_host((name, 0)).await?.collect()) })
    })
}

/// Resolves a host name and refuses the whole answer if any address breaks the policy: a
/// mixed answer is what a rebinding attack looks like, and dialling the good half would hide
/// it.
#[derive(Clone)]
pub(crate) struct GuardedResolver {
    policy: Arc<EndpointPolicy>,
    lookup: Lookup,
}

impl GuardedResolver {
    pub(crate) fn new(policy: Arc<EndpointPolicy>, lookup: Lookup) -> Self {
        Self { policy, lookup }
    }
}

impl fmt::Debug for GuardedResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedResolver")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl tower::Service<Name> for GuardedResolver {
    type Response = Addrs;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Addrs, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let policy = Arc::clone(&self.policy);
        let lookup = (self.lookup)(name.as_str().to_owned());
        Box::pin(async move {
            let addrs = lookup.await?;
            for addr in &addrs {
                policy.check_ip(addr.ip())?;
            }
            Ok(addrs.into_iter())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::ValidationError;
    use tower::ServiceExt as _;

    fn stub(addrs: &'static [&'static str]) -> Lookup {
        Arc::new(move |_| {
            Box::pin(async move { Ok(addrs.iter().map(|a| a.parse().unwrap()).collect()) })
        })
    }

    async fn resolve(
        policy: EndpointPolicy,
        addrs: &'static [&'static str],
    ) -> Result<Addrs, BoxError> {
        GuardedResolver::new(Arc::new(policy), stub(addrs))
            .oneshot("member.example".parse().unwrap())
            .await
    }

    // Stubbed answers: nothing is resolved for real, nothing is dialled.
    #[tokio::test]
    async fn a_name_resolving_to_a_forbidden_address_is_refused() {
        for addrs in [
            &["169.254.169.254:0"][..],
            &["10.0.0.1:0", "127.0.0.1:0"][..],
            &["[fe80::1]:0"][..],
        ] {
            let err = resolve(EndpointPolicy::default(), addrs).await.unwrap_err();
            let err = err.downcast::<ValidationError>().unwrap();
            let forbidden = matches!(*err, ValidationError::Forbidden(_));
            assert!(forbidden, "{addrs:?}: {err}");
        }
    }

    #[tokio::test]
    async fn allowed_answers_pass() {
        let got = resolve(EndpointPolicy::default(), &["10.0.0.1:0"]).await;
        assert_eq!(
            got.unwrap().collect::<Vec<_>>(),
            ["10.0.0.1:0".parse().unwrap()]
        );
        let loopback = resolve(EndpointPolicy::loopback(), &["127.0.0.1:0"]).await;
        assert!(loopback.is_ok());
    }
}
