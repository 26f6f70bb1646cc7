//! Wires the registry, the supervisor, the HTTP server and the control-plane guard together.

use std::{future::Future, sync::Arc};

use anyhow::Context as _;
use cluster_registry::{ArgoCdConfig, DirectoryConfig, KarmadaConfig, RegistryBuilder};
use member_client::ClientFactory;

use crate::{
    cli::{Args, MembersFrom},
    control_plane::{ControlPlane, SelfCredentialGuard, join_election, self_probe},
    http::{self, HttpState},
    member::{status_writer::StatusWriter, supervisor::Supervisor, task::MemberContext},
    metrics::Metrics,
    mirror::Mirror,
    readiness::{Readiness, sources},
};

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
    let control_plane = ControlPlane::connect(&args, &metrics).await?;

    let builder = RegistryBuilder::new()
        .endpoint_policy(args.endpoint_policy())
        .secret_namespaces(args.secret_namespace.clone());
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
    metrics.watch_registry(registry.clone());

    let mirror = Mirror::default();
    let identity = args.identity();
    let (status_writer, _lease) = match (&control_plane, args.members_from, args.write_status) {
        (Some(cp), MembersFrom::Karmada, true) => {
            let lease = if args.leader_elect {
                Some(join_election(cp.client.clone(), &args, &identity, &metrics).await?)
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
    let context = MemberContext {
        mirror: mirror.clone(),
        metrics: metrics.clone(),
        status_writer,
        probe_period: args.probe_period(),
        resources: Arc::from(args.mirror.clone()),
    };
    let supervisor = Supervisor::new(
        ClientFactory::new(registry.tokens().clone()).with_policy(args.endpoint_policy()),
        context,
    );

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
    let guarded = control_plane.as_ref().filter(|cp| cp.health.is_some());
    let guard = guarded.and_then(|cp| cp.health.clone()).map(|health| {
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
    let self_probe = self_probe(guarded.map(|cp| cp.client.clone()), args.probe_period());
    let sources = sources::follow(
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
