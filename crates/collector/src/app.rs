//! Wires the registry, the supervisor, the HTTP server and the self-credential guard together.

use std::{future::Future, sync::Arc, time::Duration};

use anyhow::Context as _;
use cluster_registry::{ArgoCdConfig, DirectoryConfig, KarmadaConfig, RegistryBuilder};
use kube::{Client, config::KubeConfigOptions};
use member_client::{
    ClientFactory, CredentialHealth, FileSource, MemberClientConfig, TokenCache, TokenCacheConfig,
};

use crate::{
    cli::{Args, MembersFrom},
    http::{self, HttpState},
    member_task::Shared,
    metrics::Metrics,
    mirror::Mirror,
    readiness::{Readiness, SelfCredentialGuard},
    source_readiness,
    status_writer::StatusWriter,
    supervisor::Supervisor,
};

/// How long the collector's own token file is trusted before it is read again, as kube does for
/// in-cluster tokens; a 401 re-reads it at once anyway.
const SELF_TOKEN_TTL: Duration = Duration::from_secs(60);

/// Runs the collector until `shutdown` resolves (Ok) or something fails for good (Err): the
/// registry or supervisor stopping, the HTTP listener failing, or the control plane rejecting
/// the collector's own credential for longer than the grace period.
///
/// # Errors
/// Start-up errors (no control-plane config, the listen address taken) and the failures above.
pub async fn run(
    args: Args,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let readiness = Readiness::new();
    let control_plane = control_plane(&args, &metrics).await?;

    let builder = RegistryBuilder::new();
    let builder = match (args.members_from, &control_plane) {
        (MembersFrom::Directory, _) => {
            let dir = args
                .members_dir
                .clone()
                .context("--members-dir is required with --members-from directory")?;
            builder.directory(DirectoryConfig::new(dir))
        }
        (MembersFrom::Karmada, Some(cp)) => builder.karmada_with(
            cp.client.clone(),
            KarmadaConfig {
                secret_label_selector: args.secret_label_selector.clone(),
            },
        ),
        (MembersFrom::Argocd, Some(cp)) => builder.argocd(
            cp.client.clone(),
            ArgoCdConfig {
                namespaces: args.argocd_namespace.clone(),
            },
        ),
        (_, None) => anyhow::bail!("reading members from the control plane needs its client"),
    };
    let (registry, events, driver) = builder.build();
    metrics.watch_token_cache("members", registry.tokens().clone());

    let mirror = Mirror::default();
    let identity = args.identity();
    let (status_writer, _lease) = match (&control_plane, args.members_from, args.write_status) {
        (Some(cp), MembersFrom::Karmada, true) => {
            let lease = if args.leader_elect {
                Some(leader_election(cp.client.clone(), &args, &identity, &metrics).await?)
            } else {
                metrics.set_leader(true);
                None
            };
            let leader = lease.as_ref().map(|lease| lease.leader.clone());
            (
                Some(StatusWriter::new(cp.client.clone(), identity, leader)),
                lease,
            )
        }
        _ => (None, None),
    };
    let shared = Shared {
        mirror: mirror.clone(),
        metrics: metrics.clone(),
        status_writer,
        probe_period: args.probe_period(),
        resources: Arc::from(args.mirror.clone()),
    };
    let supervisor = Supervisor::new(ClientFactory::new(registry.tokens().clone()), shared);

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    tracing::info!(address = %listener.local_addr()?, "serving /metrics, /healthz, /readyz, /api/v1/clusters");
    let router = http::router(HttpState {
        metrics: metrics.clone(),
        readiness: readiness.clone(),
        clusters: Arc::new(mirror),
    });
    let server = http::serve(listener, router, shutdown);

    // The guard decides readiness when there is an own credential to watch; otherwise the
    // collector is ready once it runs.
    let guard = control_plane
        .as_ref()
        .and_then(|cp| cp.health.clone())
        .map(|health| {
            SelfCredentialGuard::new(health, readiness.clone(), args.self_rejected_grace())
        });
    if guard.is_none() {
        readiness.mark_ready();
    }
    let guard = async move {
        match guard {
            Some(guard) => guard.run().await,
            None => std::future::pending().await,
        }
    };
    // Long-lived watches authenticated once and do not notice a revoked token until they
    // reconnect; a periodic request does, so readiness reflects the credential within a period.
    let self_probe = self_probe(
        control_plane
            .as_ref()
            .filter(|cp| cp.health.is_some())
            .map(|cp| cp.client.clone()),
        args.probe_period(),
    );

    let sources = source_readiness::follow(
        registry.sources().subscribe(),
        readiness.clone(),
        metrics.clone(),
    );

    tokio::select! {
        () = driver.run() => anyhow::bail!("the registry stopped"),
        () = sources => anyhow::bail!("the registry's source states closed"),
        () = supervisor.run(events) => anyhow::bail!("the registry's event channel closed"),
        served = server => served.context("the HTTP server failed"),
        rejected = guard => Err(rejected.into()),
        () = self_probe => anyhow::bail!("the control-plane probe stopped"),
    }
}

/// Asks the control plane for its version every `period` through the collector's own
/// credential; the bearer layer turns a lasting 401 into `CredentialState::Rejected`.
async fn self_probe(client: Option<Client>, period: Duration) {
    let Some(client) = client else {
        return std::future::pending().await;
    };
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Err(err) = client.apiserver_version().await {
            tracing::debug!(error = %err, "control-plane probe failed");
        }
    }
}

/// The leader-election Lease: whether this replica leads, and the task that keeps it.
struct Lease {
    leader: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Joins the election for the `tether-collector` Lease; leadership is mirrored into
/// `tether_leader` and logged on each change.
async fn leader_election(
    client: Client,
    args: &Args,
    identity: &str,
    metrics: &Metrics,
) -> anyhow::Result<Lease> {
    let duration = args.leader_election_lease_seconds;
    // The renewal margin: renew a third of the duration before expiry (at least 1 s).
    let grace = (duration / 3).max(1);
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client, "tether-collector")
        .with_namespace(&args.leader_election_namespace)
        .with_identity(identity)
        .with_duration(duration)
        .with_grace(grace)
        .build()
        .await
        .context("joining leader election")?;
    let (leader, election) = manager.watch().await;
    let mut changes = leader.clone();
    let metrics = metrics.clone();
    let identity = identity.to_owned();
    let task = tokio::spawn(async move {
        loop {
            let leading = *changes.borrow_and_update();
            metrics.set_leader(leading);
            tracing::info!(identity = %identity, leading, "leader election");
            if changes.changed().await.is_err() {
                break;
            }
        }
        election.abort();
    });
    Ok(Lease { leader, task })
}

/// The control-plane client, and the health of the collector's own credential when it reads a
/// token file.
struct ControlPlane {
    client: Client,
    health: Option<CredentialHealth>,
}

async fn control_plane(args: &Args, metrics: &Metrics) -> anyhow::Result<Option<ControlPlane>> {
    if args.members_from == MembersFrom::Directory
        && args.kubeconfig.is_none()
        && args.control_plane_url.is_none()
    {
        return Ok(None);
    }
    if let Some(path) = &args.kubeconfig {
        let kubeconfig = kube::config::Kubeconfig::read_from(path)
            .with_context(|| format!("reading {}", path.display()))?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        return Ok(Some(ControlPlane {
            client: Client::try_from(config)?,
            health: None,
        }));
    }
    // In-cluster, or a token file given by flags: the token goes through the same cache and
    // bearer layer as the members', so a rotated projected token is picked up on its own.
    let url = match &args.control_plane_url {
        Some(url) => url.clone(),
        None => {
            let host = std::env::var("KUBERNETES_SERVICE_HOST")
                .context("no --kubeconfig, no --control-plane-url, and not in a cluster")?;
            let port =
                std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".to_owned());
            if host.contains(':') {
                format!("https://[{host}]:{port}")
            } else {
                format!("https://{host}:{port}")
            }
        }
    };
    let source = FileSource::new(&args.control_plane_token_file);
    let secret = source.secret_ref();
    let ca = tokio::fs::read(&args.control_plane_ca_file)
        .await
        .with_context(|| format!("reading {}", args.control_plane_ca_file.display()))?;
    let tokens = TokenCache::new(
        source,
        TokenCacheConfig {
            ttl: SELF_TOKEN_TTL,
            ..TokenCacheConfig::default()
        },
    );
    metrics.watch_token_cache("self", tokens.clone());
    let health = CredentialHealth::new();
    let config = MemberClientConfig::new("control-plane", url, secret).with_ca_bundle(ca);
    let client = ClientFactory::new(tokens).build(&config, &health)?;
    Ok(Some(ControlPlane {
        client,
        health: Some(health),
    }))
}
