//! Wires the registry, the supervisor, the HTTP server and the control-plane guard together.

use std::{future::Future, sync::Arc, time::Duration};

use anyhow::Context as _;
use futures::FutureExt as _;
use member_client::ClientFactory;

use crate::{
    cli::{Args, MembersFrom},
    clusterprofile,
    control_plane::{ControlPlane, Lease, SelfCredentialGuard, Startup, self_probe},
    http::{
        self, HttpState, ServerLimits,
        auth::{AccessGate, KubeAccessReview, ReviewConfig},
    },
    member::{
        status_writer::StatusWriter,
        supervisor::{ShardGate, Supervisor},
        task::MemberContext,
    },
    metrics::Metrics,
    minting,
    mirror::{InitialList, Mirror},
    readiness::{Readiness, sources},
    registry_builder::registry_builder,
    shard::{Ownership, Shard, ShardMode},
};

/// How long shutting down may wait for the Lease to be given up.
const LEASE_RELEASE_DEADLINE: Duration = Duration::from_secs(2);

/// Runs the collector until `shutdown` resolves (Ok) or something fails for good (Err): the
/// registry or supervisor stopping, the HTTP listener failing, or the control plane rejecting
/// the collector's own credential for longer than the grace period.
///
/// # Errors
/// Start-up errors (no control-plane config, the listen address taken) and the failures above.
pub async fn run(
    mut args: Args,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    args.mint = (args.mint).with_former_variables(|name| std::env::var(name).ok());
    let metrics = Metrics::new();
    let readiness = Readiness::default();
    let control_plane = ControlPlane::connect(&args, &metrics).await?;
    let gate = access_gate(&args, control_plane.as_ref())?;

    let builder = registry_builder(&args, control_plane.as_ref())?;
    let (registry, events, driver) = builder.build();
    metrics.watch_credential_cache("members", registry.tokens().clone());
    metrics.watch_registry(registry.clone(), args.sources.members_from);

    let mirror = Mirror::default();
    let identity = args.identity();
    let startup = Startup {
        args: &args,
        control_plane: control_plane.as_ref(),
        identity: &identity,
        metrics: &metrics,
    };
    let (shard, membership) = match args.shard.shards {
        ShardMode::Off => (None, None),
        ShardMode::Auto => {
            let cp = crate::shard::require_control_plane(control_plane.as_ref())?;
            let (shard, membership) = Shard::join(
                cp.client.clone(),
                &args.shard,
                &args.leader_election_namespace,
                &identity,
            )?;
            tracing::info!(identity = %identity, group = %args.shard.shard_group, "sharding: joined the group");
            (Some(shard), Some(membership))
        }
    };
    let (status_writer, writes, lease) =
        match (&control_plane, args.sources.members_from, args.write_status) {
            (Some(cp), MembersFrom::Karmada, true) if shard.is_some() => {
                let (writer, writes) =
                    StatusWriter::new(cp.client.clone(), identity.clone(), None, shard.as_ref());
                (Some(writer), Some(writes), None)
            }
            (Some(cp), MembersFrom::Karmada, true) => {
                let lease = startup.lease_or_join(None, cp).await?;
                let leader = lease.as_ref().and_then(Lease::leader);
                let (writer, writes) =
                    StatusWriter::new(cp.client.clone(), identity.clone(), leader, None);
                (Some(writer), Some(writes), lease)
            }
            _ => (None, None, None),
        };
    let (profiles, publishes, lease) = clusterprofile::start(startup, &registry, lease).await?;
    let (minter, lease) = minting::minter(startup, lease).await?;
    let context = MemberContext {
        mirror: mirror.clone(),
        metrics: metrics.clone(),
        status_writer,
        profiles,
        probe_period: args.probe_period(),
        probe_timeout: args.probe_timeout(),
        client_limits: args.member_client_limits(),
        resources: Arc::from(args.mirror.clone()),
        max_objects: args.member_max_objects(),
        initial_list: if args.member_streaming_lists {
            InitialList::Streamed
        } else {
            InitialList::Paged
        },
        minter,
    };
    let supervisor = Supervisor::new(
        ClientFactory::new(registry.tokens().clone())
            .with_policy(args.endpoint_policy())
            .with_http2(args.member_http2),
        context,
        registry.clone(),
    );

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let probe_listener = tokio::net::TcpListener::bind(args.probe_listen)
        .await
        .with_context(|| format!("listening on {} (--probe-listen)", args.probe_listen))?;
    tracing::info!(address = %listener.local_addr()?, "serving /metrics, /healthz, /readyz, /api/v1/clusters");
    tracing::info!(address = %probe_listener.local_addr()?, "serving the probes /healthz, /readyz");
    let limits = ServerLimits {
        max_connections_per_peer: args.max_connections_per_peer,
        ..ServerLimits::default()
    };
    let state = HttpState {
        metrics: metrics.clone(),
        readiness: readiness.clone(),
        clusters: Arc::new(mirror),
        shard: shard.as_ref().map(|shard| shard.map.clone()),
    };
    let probe_limits = ServerLimits::probes();
    let probe_router = http::probe_router(state.clone(), probe_limits.request_timeout);
    let router = http::router(state, gate, limits.request_timeout);
    let (transport, reload_cert) = listen_transport(&args, &identity)?;
    let shutdown = shutdown.boxed().shared();
    let probe_shutdown = shutdown.clone();
    let server = async move {
        // Two loops, two sets of caps: whatever holds the API port, the probes still answer.
        // The probes are plain HTTP, as the kubelet asks them; they carry no token.
        let serving = async {
            tokio::join!(
                http::serve(listener, &transport, router, &limits, shutdown),
                http::serve(
                    probe_listener,
                    &http::tls::Transport::Plain,
                    probe_router,
                    &probe_limits,
                    probe_shutdown
                ),
            )
        };
        tokio::select! {
            (api, probes) = serving => api.and(probes),
            () = reload_cert => Err(std::io::Error::other("the certificate reloader stopped")),
        }
    };

    // The guard decides readiness when there is an own credential to watch; otherwise the
    // collector is ready once it runs.
    let guarded = control_plane.as_ref().filter(|cp| cp.health.is_some());
    let guard = guarded.and_then(|cp| cp.health.clone()).map(|health| {
        SelfCredentialGuard::new(health, readiness.clone(), args.self_rejected_grace())
    });
    if guard.is_none() {
        readiness.mark_ready();
    }
    let self_probe = guarded.map(|cp| self_probe(cp.client.clone(), args.probe_period()));
    let sources = sources::follow(
        registry.sources().subscribe(),
        readiness.clone(),
        metrics.clone(),
    );

    let outcome = tokio::select! {
        () = driver.run() => Err(anyhow::anyhow!("the registry stopped")),
        () = sources => Err(anyhow::anyhow!("the registry's source states closed")),
        () = supervise(supervisor, events, shard.as_ref()) => Err(anyhow::anyhow!("the registry's event channel closed")),
        () = or_never(membership) => Err(anyhow::anyhow!("the shard Lease keeper stopped")),
        () = or_never(writes) => Err(anyhow::anyhow!("the status writer stopped")),
        () = publishes => Err(anyhow::anyhow!("the ClusterProfile publisher stopped")),
        served = server => served.context("the HTTP server failed"),
        rejected = or_never(guard.map(SelfCredentialGuard::run)) => Err(rejected.into()),
        () = or_never(self_probe) => Err(anyhow::anyhow!("the control-plane probe stopped")),
    };
    // Everything that watched leadership is gone with the select: give the Lease up, so that
    // the Lease is free the moment this replica is gone.
    if let Some(lease) = lease {
        lease.release(LEASE_RELEASE_DEADLINE).await;
    }
    if let Some(shard) = shard {
        shard.release(LEASE_RELEASE_DEADLINE).await;
    }
    outcome
}

/// `task` run to its end; without one, never ends.
async fn or_never<T>(task: Option<impl Future<Output = T>>) -> T {
    match task {
        Some(task) => task.await,
        None => std::future::pending().await,
    }
}

/// Runs the supervisor over every member, or with `shard`, over this replica's own.
async fn supervise(
    supervisor: Supervisor,
    events: tokio::sync::mpsc::Receiver<cluster_registry::RegistryEvent>,
    shard: Option<&Shard>,
) {
    match shard {
        None => supervisor.run(events).await,
        Some(shard) => {
            let ownership = Ownership::new(shard.load_factor, shard.map.clone());
            let gate = ShardGate::new(shard.view.clone(), ownership, shard.handover());
            supervisor.run_sharded(events, gate).await;
        }
    }
}

/// What `--listen` speaks: TLS with the certificate files (and the task that reloads them),
/// TLS with a self-signed certificate when none is given, or plain HTTP when asked for.
///
/// # Errors
/// Certificate files that do not load.
fn listen_transport(
    args: &Args,
    identity: &str,
) -> anyhow::Result<(
    http::tls::Transport,
    futures::future::BoxFuture<'static, ()>,
)> {
    let never = || std::future::pending().boxed();
    if args.insecure_plain_http_listen {
        tracing::warn!(
            "--insecure-plain-http-listen: callers' bearer tokens cross the network in clear"
        );
        return Ok((http::tls::Transport::Plain, never()));
    }
    match &args.tls_files {
        Some(files) => {
            let (transport, reload) = http::tls::from_files(files.clone())
                .context("--tls-cert-file, --tls-private-key-file")?;
            Ok((transport, reload.boxed()))
        }
        None => {
            tracing::info!(
                "no --tls-cert-file: serving TLS with a self-signed certificate made at start"
            );
            // The identity (the pod's name) only when it can be a DNS name at all.
            let usable = !identity.is_empty()
                && identity.len() <= 253
                && identity
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
            let mut names = vec!["localhost".to_owned()];
            names.extend(usable.then(|| identity.to_owned()));
            Ok((http::tls::self_signed(names)?, never()))
        }
    }
}

/// The gate in front of `/metrics` and `/api/...`: reviews through the control plane, or none
/// with `--insecure-serve-api`.
///
/// # Errors
/// No control plane to review against and no `--insecure-serve-api`.
fn access_gate(
    args: &Args,
    control_plane: Option<&ControlPlane>,
) -> anyhow::Result<Option<AccessGate>> {
    if args.insecure_serve_api {
        tracing::warn!("--insecure-serve-api: /metrics and /api/... answer anyone who can connect");
        return Ok(None);
    }
    let Some(control_plane) = control_plane else {
        anyhow::bail!(
            "no control plane to authenticate readers of /metrics and /api/... against: \
             give --kubeconfig or --control-plane-url, or --insecure-serve-api to serve them \
             to anyone who can reach --listen"
        );
    };
    let review = KubeAccessReview::new(control_plane.reviews.clone());
    let config = ReviewConfig {
        rate: args.access_review_rate,
        burst: args.access_review_burst,
        ..ReviewConfig::default()
    };
    Ok(Some(AccessGate::new(Arc::new(review), &config)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tests::directory;

    #[test]
    fn without_a_control_plane_the_api_needs_an_explicit_opt_out() {
        let err = access_gate(&directory(&[]), None).unwrap_err().to_string();
        assert!(err.contains("--insecure-serve-api"), "{err}");
        let open = access_gate(&directory(&["--insecure-serve-api"]), None).unwrap();
        assert!(open.is_none());
    }
}
