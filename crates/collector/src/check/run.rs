//! `collector check` from start to report: the registry the flags ask for, listed once, and
//! every member checked, `--check-concurrency` at a time.

use std::{future::Future, sync::Arc, time::Duration};

use cluster_registry::{MemberState, Registry, SourceState};
use futures::StreamExt;
use member_client::ClientFactory;
use tokio::time::Instant;

use super::{
    args::{CheckArgs, Output},
    member::Checker,
    report::{Report, SourceReport},
    table,
};
use crate::{
    control_plane::ControlPlane, metrics::Metrics, mirror::MirroredResource,
    registry_builder::registry_builder,
};

/// How often the wait for the sources looks again.
const LISTED_POLL: Duration = Duration::from_millis(100);

/// What a check produced: the report as asked for (`-o`), and the exit code.
#[derive(Clone, Debug)]
pub struct CheckOutcome {
    /// The table or JSON to print.
    pub rendered: String,
    /// 0 when every member checked is fully usable, else 1.
    pub exit_code: u8,
}

/// Builds the registry from the flags as the collector does, waits (up to `--check-timeout`)
/// until every source is listed, checks every member (or `--member`), and renders the report.
///
/// # Errors
/// Start-up errors, as the collector's: no control-plane config, a flag its source needs, an
/// unusable provider file; and the registry stopping.
pub async fn run(check: CheckArgs) -> anyhow::Result<CheckOutcome> {
    let args = &check.args;
    let control_plane = ControlPlane::connect(args, &Metrics::new()).await?;
    let (registry, mut events, driver) = registry_builder(args, control_plane.as_ref())?.build();
    // The check reads the registry's state, not its events; draining them keeps the registry
    // from waiting on a full channel.
    let drain = async move {
        while events.recv().await.is_some() {}
        std::future::pending::<()>().await;
    };
    let checker = Checker {
        factory: ClientFactory::new(registry.tokens().clone())
            .with_policy(args.endpoint_policy())
            .with_http2(args.member_http2),
        resources: reviewed_resources(&args.mirror),
        client_limits: args.member_client_limits(),
        deadline: check.check_timeout(),
        registry,
    };
    let report = async {
        wait_listed(&checker.registry, check.check_timeout()).await;
        let names = match &check.member {
            Some(name) => vec![name.clone()],
            None => checker.registry.states().into_keys().collect(),
        };
        let members = at_most(check.check_concurrency(), &names, |name| {
            checker.check(name)
        })
        .await;
        Report::new(sources(&checker.registry), members)
    };
    let report = tokio::select! {
        () = driver.run() => anyhow::bail!("the registry stopped"),
        () = drain => anyhow::bail!("the registry's events ended"),
        report = report => report,
    };
    let rendered = match check.output {
        Output::Table => table::render(&report),
        Output::Json => serde_json::to_string_pretty(&report)? + "\n",
    };
    Ok(CheckOutcome {
        rendered,
        exit_code: report.exit_code(),
    })
}

/// Runs `check` for every name, at most `limit` at a time, and returns the results in the
/// names' order.
pub(super) async fn at_most<'a, T, Fut>(
    limit: usize,
    names: &'a [String],
    check: impl FnMut(&'a str) -> Fut,
) -> Vec<T>
where
    Fut: Future<Output = T>,
{
    futures::stream::iter(names.iter().map(String::as_str).map(check))
        .buffered(limit.max(1))
        .collect()
        .await
}

/// The mirrored kinds, and nodes, which the collector always watches.
fn reviewed_resources(mirror: &[MirroredResource]) -> Arc<[MirroredResource]> {
    let nodes = MirroredResource {
        group: String::new(),
        version: "v1".to_owned(),
        resource: "nodes".to_owned(),
    };
    let mut resources = mirror.to_vec();
    if !resources.contains(&nodes) {
        resources.push(nodes);
    }
    resources.into()
}

/// Waits until every source is listed and no member waits for its Secrets, or a source fails
/// (waiting for its retry would only delay the answer), or `limit` passes.
async fn wait_listed(registry: &Registry, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let states = registry.sources().now();
        let failing = (states.values()).any(|s| matches!(s, SourceState::Failing(_)));
        let listed = states.values().all(|s| *s == SourceState::Listed);
        let pending = (registry.states().values()).any(|s| *s == MemberState::Pending);
        if failing || (listed && !pending) {
            return;
        }
        tokio::time::sleep(LISTED_POLL).await;
    }
}

fn sources(registry: &Registry) -> Vec<SourceReport> {
    registry
        .sources()
        .now()
        .into_iter()
        .map(|(source, state)| {
            let (state, error) = match state {
                SourceState::Listed => ("Listed", None),
                SourceState::Failing(error) => ("Failing", Some(error)),
                _ => ("Listing", None),
            };
            SourceReport {
                source: source.to_string(),
                state,
                error,
            }
        })
        .collect()
}
