//! Models of how other systems give a long-lived client its member token, as `kube::Client`s
//! over the same members, so that they can be measured beside Tether in the same run.
//!
//! They are models, kept small and honest:
//! - [`Model::BakedIn`]: the token is copied into the client when it is built (`kube::Config`'s
//!   `auth_info.token`), as Karmada's cluster clients did before PR #7663 and as any client-go
//!   `rest.Config{BearerToken}` does. Nothing ever re-reads it.
//! - [`Model::TtlOnly`]: the token is read from the Secret and cached for 5 minutes; a 401
//!   resets the cache (only if it still holds the token that got the 401) and the failed
//!   request is returned as failed, not retried: client-go's cached, resettable token source
//!   (`transport.NewCachedTokenSource` + `ResettableTokenSource` in `tokenSourceTransport`),
//!   which Karmada ≥ 1.19 uses for member clients.
//! - [`Model::EveryRequest`]: the Secret is read on every request, the crude fix.
//! - [`Model::Tether`]: `member_client::ClientFactory` over the registry's token cache, the code
//!   the collector runs.
//!
//! The TTL and every-request models read the Secret with a GET through the control plane's
//! admin client, as Karmada's cluster-client builders do, and count those reads. They sit in a
//! [`ModelAuthLayer`] above a `tower::buffer` (kube's inner service is not `Clone`), which adds a
//! channel hop per request: irrelevant to what is compared with them (seconds, counts).

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use cluster_registry::karmada::TOKEN_KEY;
use futures::future::BoxFuture;
use http::{HeaderValue, Request, Response, header::AUTHORIZATION};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, client::Body, client::ClientBuilder};
use tower::{BoxError, Layer, Service, ServiceExt as _, buffer::Buffer};

/// The TTL of [`Model::TtlOnly`]'s cache.
pub const TTL: Duration = Duration::from_secs(300);

/// Which credential handling a client models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Model {
    /// Token fixed when the client is built.
    BakedIn,
    /// Token cached for [`TTL`], reset on 401 without retrying the request.
    TtlOnly,
    /// Secret read on every request.
    EveryRequest,
    /// Tether's member client.
    Tether,
}

impl Model {
    /// Every model, in table order.
    pub const ALL: [Self; 4] = [
        Self::BakedIn,
        Self::TtlOnly,
        Self::EveryRequest,
        Self::Tether,
    ];

    /// A short name for the table.
    pub fn label(self) -> &'static str {
        match self {
            Self::BakedIn => "bake-in",
            Self::TtlOnly => "TTL only",
            Self::EveryRequest => "read every request",
            Self::Tether => "Tether",
        }
    }
}

/// Reads a member's token from its Secret on the control plane, counting the reads.
#[derive(Clone)]
pub struct SecretReader {
    secrets: Api<Secret>,
    name: String,
    reads: Arc<AtomicU64>,
}

impl SecretReader {
    /// Reads Secret `namespace/name` through `control_plane`, counting into `reads`.
    pub fn new(control_plane: Client, namespace: &str, name: &str, reads: Arc<AtomicU64>) -> Self {
        Self {
            secrets: Api::namespaced(control_plane, namespace),
            name: name.to_owned(),
            reads,
        }
    }

    /// GETs the Secret and returns its token.
    ///
    /// # Errors
    /// API errors, or no usable token.
    pub async fn read(&self) -> anyhow::Result<String> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let secret = self.secrets.get(&self.name).await?;
        let token = secret
            .data
            .and_then(|mut d| d.remove(TOKEN_KEY))
            .context("the Secret has no token")?;
        Ok(String::from_utf8(token.0)?.trim().to_owned())
    }
}

/// How [`ModelAuthLayer`] gets a token.
enum Policy {
    /// Read on every request.
    EveryRequest,
    /// Cached for a TTL; a 401 resets the cache.
    Ttl {
        ttl: Duration,
        cached: Mutex<Option<(String, Instant)>>,
    },
}

struct ModelAuth {
    policy: Policy,
    reader: SecretReader,
}

impl ModelAuth {
    async fn token(&self) -> anyhow::Result<String> {
        match &self.policy {
            Policy::EveryRequest => self.reader.read().await,
            Policy::Ttl { ttl, cached } => {
                if let Some((token, at)) = lock(cached).as_ref()
                    && at.elapsed() < *ttl
                {
                    return Ok(token.clone());
                }
                let token = self.reader.read().await?;
                *lock(cached) = Some((token.clone(), Instant::now()));
                Ok(token)
            }
        }
    }

    /// A 401 answered `token`: a TTL cache still holding it is reset. No retry.
    fn rejected(&self, token: &str) {
        if let Policy::Ttl { cached, .. } = &self.policy {
            let mut cached = lock(cached);
            if cached.as_ref().is_some_and(|(held, _)| held == token) {
                *cached = None;
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sets `Authorization` from a baseline model's token policy.
#[derive(Clone)]
pub struct ModelAuthLayer {
    auth: Arc<ModelAuth>,
}

impl ModelAuthLayer {
    /// Reads the Secret on every request.
    pub fn every_request(reader: SecretReader) -> Self {
        Self {
            auth: Arc::new(ModelAuth {
                policy: Policy::EveryRequest,
                reader,
            }),
        }
    }

    /// Caches the token for `ttl`; a 401 resets the cache, and the request fails.
    pub fn ttl(reader: SecretReader, ttl: Duration) -> Self {
        Self {
            auth: Arc::new(ModelAuth {
                policy: Policy::Ttl {
                    ttl,
                    cached: Mutex::new(None),
                },
                reader,
            }),
        }
    }
}

impl<S, B> Layer<S> for ModelAuthLayer
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + Sync,
    B: Send + 'static,
{
    type Service = ModelAuthService<S::Future, B>;

    fn layer(&self, inner: S) -> Self::Service {
        ModelAuthService {
            inner: Buffer::new(inner, 64),
            auth: Arc::clone(&self.auth),
            _body: std::marker::PhantomData,
        }
    }
}

/// Service of [`ModelAuthLayer`].
pub struct ModelAuthService<F, B> {
    inner: Buffer<Request<Body>, F>,
    auth: Arc<ModelAuth>,
    _body: std::marker::PhantomData<fn() -> B>,
}

impl<F, B, E> Service<Request<Body>> for ModelAuthService<F, B>
where
    F: std::future::Future<Output = Result<Response<B>, E>> + Send + 'static,
    E: Into<BoxError>,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<B>, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        let auth = Arc::clone(&self.auth);
        Box::pin(async move {
            let token = auth.token().await.map_err(BoxError::from)?;
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))?;
            value.set_sensitive(true);
            request.headers_mut().insert(AUTHORIZATION, value);
            let response = inner.oneshot(request).await?;
            if response.status() == http::StatusCode::UNAUTHORIZED {
                auth.rejected(&token);
            }
            Ok(response)
        })
    }
}

/// A client for `endpoint` (trusting `ca_pem`) whose token comes from `layer`.
///
/// # Errors
/// The CA or endpoint unusable.
pub fn layered_client(
    endpoint: &str,
    ca_pem: &str,
    layer: &ModelAuthLayer,
) -> anyhow::Result<Client> {
    let config = base_config(endpoint, ca_pem)?;
    Ok(ClientBuilder::try_from(config)?.with_layer(layer).build())
}

/// A client for `endpoint` with `token` fixed in its `kube::Config`.
///
/// # Errors
/// The CA or endpoint unusable.
pub fn baked_in_client(endpoint: &str, ca_pem: &str, token: &str) -> anyhow::Result<Client> {
    let mut config = base_config(endpoint, ca_pem)?;
    config.auth_info.token = Some(token.to_owned().into());
    Ok(Client::try_from(config)?)
}

fn base_config(endpoint: &str, ca_pem: &str) -> anyhow::Result<kube::Config> {
    // The harness's own helper builds exactly this config (CA roots, connect timeout); take it
    // and drop its credential.
    let client_config = testkit::Cluster::with_admin_token("model", endpoint, ca_pem, "unused")?;
    let mut config = client_config.admin_config();
    config.auth_info = kube::config::AuthInfo::default();
    Ok(config)
}
