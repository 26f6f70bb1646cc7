//! The collector's own control-plane client, and the probe that keeps its credential state
//! current.

use std::time::Duration;

use anyhow::Context as _;
use kube::{Client, client::ClientBuilder, config::KubeConfigOptions};
use member_client::{
    ClientFactory, ClientLimits, CredentialCache, CredentialCacheConfig, CredentialHealth,
    MemberClientConfig, file_source::FileSource, request_deadline::RequestDeadlineLayer,
    validation::Cidr, validation::EndpointPolicy,
};

use crate::{
    cli::{Args, MembersFrom},
    http::auth::MAX_REVIEWS_IN_FLIGHT,
    metrics::Metrics,
};

/// How long the collector's own token file is trusted before it is read again, as kube does for
/// in-cluster tokens; a 401 re-reads it at once anyway.
const SELF_TOKEN_TTL: Duration = Duration::from_secs(60);

/// The control-plane clients, and the health of the collector's own credential when it reads a
/// token file.
pub(crate) struct ControlPlane {
    /// Reads member definitions and writes status, Events and Leases.
    pub(crate) client: Client,
    /// Creates the access reviews of the HTTP server's callers: a client of its own, with its
    /// own connections and in-flight limit, so that however many callers wait for a review,
    /// a Lease renewal or a status write on [`client`](Self::client) waits behind none.
    pub(crate) reviews: Client,
    /// What the control plane says of the collector's token; `None` with a kubeconfig, whose
    /// credential kube manages.
    pub(crate) health: Option<CredentialHealth>,
}

impl ControlPlane {
    /// The client `args` ask for, or `None` when members come from a directory and no control
    /// plane is configured.
    ///
    /// # Errors
    /// No kubeconfig, URL or in-cluster environment; an unreadable kubeconfig or CA file.
    pub(crate) async fn connect(args: &Args, metrics: &Metrics) -> anyhow::Result<Option<Self>> {
        if args.sources.members_from == MembersFrom::Directory
            && args.kubeconfig.is_none()
            && args.control_plane_url.is_none()
        {
            return Ok(None);
        }
        if let Some(path) = &args.kubeconfig {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let config =
                kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await?;
            if config.cluster_url.scheme_str() == Some("http") && !args.allow_plain_http {
                anyhow::bail!(
                    "the kubeconfig's server is http://, which would send credentials in clear; \
                     use https:// or pass --allow-plain-http"
                );
            }
            // Two clients of one config: two connection pools.
            let build = |config| -> anyhow::Result<Client> {
                let deadline = RequestDeadlineLayer::new(args.request_timeout());
                Ok(ClientBuilder::try_from(config)?
                    .with_layer(&deadline)
                    .build())
            };
            return Ok(Some(Self {
                client: build(config.clone())?,
                reviews: build(config)?,
                health: None,
            }));
        }
        // In-cluster, or a token file given by flags: the token goes through the same cache and
        // bearer layer as the members', so a rotated projected token is picked up on its own.
        let url = (args.control_plane_url.clone()).map_or_else(in_cluster_url, Ok)?;
        let source = FileSource::new(&args.control_plane_token_file);
        let secret = source.secret_ref();
        let ca = tokio::fs::read(&args.control_plane_ca_file)
            .await
            .with_context(|| format!("reading {}", args.control_plane_ca_file.display()))?;
        let tokens = CredentialCache::new(
            source,
            CredentialCacheConfig {
                ttl: SELF_TOKEN_TTL,
                ..CredentialCacheConfig::default()
            },
        );
        metrics.watch_credential_cache("self", tokens.clone());
        let health = CredentialHealth::new();
        let mut config = MemberClientConfig::new("control-plane", url, secret).with_ca_bundle(ca);
        config.limits.request_timeout = args.request_timeout();
        let factory = ClientFactory::new(tokens).with_policy(control_plane_policy(args));
        let client = factory.build(&config, &health)?;
        // Same credential and health, its own connection pool and in-flight limit.
        let reviews = factory.build(
            &MemberClientConfig {
                limits: ClientLimits {
                    max_concurrent_requests: MAX_REVIEWS_IN_FLIGHT,
                    ..config.limits
                },
                ..config
            },
            &health,
        )?;
        Ok(Some(Self {
            client,
            reviews,
            health: Some(health),
        }))
    }
}

/// The operator names the control plane (not a member definition's author), so any address
/// is fine; `http://` still needs its opt-in, since the collector's own token would cross in
/// clear.
fn control_plane_policy(args: &Args) -> EndpointPolicy {
    let any = |cidr: &str| cidr.parse::<Cidr>().ok();
    ["0.0.0.0/0", "::/0"]
        .into_iter()
        .filter_map(any)
        .fold(EndpointPolicy::default(), EndpointPolicy::allow)
        .allow_plain_http(args.allow_plain_http)
}

fn in_cluster_url() -> anyhow::Result<String> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST")
        .context("no --kubeconfig, no --control-plane-url, and not in a cluster")?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".to_owned());
    Ok(if host.contains(':') {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
    })
}

/// Asks the control plane for its version every `period` through the collector's own
/// credential; the bearer layer turns a lasting 401 into `CredentialState::Unauthorized`.
///
/// Long-lived watches authenticated once and do not notice a revoked token until they
/// reconnect; a periodic request does, so readiness reflects the credential within a period.
pub(crate) async fn self_probe(client: Client, period: Duration) {
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Err(err) = client.apiserver_version().await {
            tracing::debug!(error = %err, "control-plane probe failed");
        }
    }
}
