//! What the collector's read API and `/metrics` say of a member, polled with deadlines.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, api::PostParams};
use testkit::{Cluster, CollectorProcess, deployment, eventually};
use tokio::time::Instant;

use crate::collector_run::RunningCollector;

/// One condition of a member as the collector's read API shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The reason, e.g. `MemberReady` or `ExecFailed`.
    pub reason: String,
    /// The message.
    pub message: String,
}

impl Condition {
    /// `status/reason`, as the tests compare and print it.
    pub fn short(&self) -> String {
        format!("{}/{}", self.status, self.reason)
    }
}

/// Condition `type_` of `member` on the collector's read API, if it is shown.
pub async fn condition(
    collector: &RunningCollector,
    member: &str,
    type_: &str,
) -> Option<Condition> {
    let cluster = collector
        .get_json(&format!("/api/v1/clusters/{member}"))
        .await
        .ok()?;
    condition_of(&cluster, type_)
}

/// [`condition`], as the read API of a collector process shows it.
pub async fn process_condition(
    process: &CollectorProcess,
    member: &str,
    type_: &str,
) -> Option<Condition> {
    let (status, body) = process
        .get(&format!("/api/v1/clusters/{member}"))
        .await
        .ok()?;
    if status != 200 {
        return None;
    }
    condition_of(&serde_json::from_str(&body).ok()?, type_)
}

/// Condition `type_` of `cluster`, a member as the read API shows it.
fn condition_of(cluster: &serde_json::Value, type_: &str) -> Option<Condition> {
    let found = cluster["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?;
    let text = |key: &str| found[key].as_str().unwrap_or_default().to_owned();
    Some(Condition {
        status: text("status"),
        reason: text("reason"),
        message: text("message"),
    })
}

/// Polls the read API until `member`'s condition `type_` is `want` (`status/reason`); returns
/// how long that took and the condition.
///
/// # Errors
/// Not reaching it within `limit` (the error names the last condition seen).
pub async fn wait_condition(
    collector: &RunningCollector,
    member: &str,
    type_: &str,
    want: &str,
    limit: Duration,
) -> anyhow::Result<(Duration, Condition)> {
    let started = Instant::now();
    let what = format!("{member}: {type_} is {want}");
    let now = eventually(&what, limit, || async {
        match condition(collector, member, type_).await {
            Some(now) if now.short() == want => Ok(now),
            now => Err(format!("{now:?}")),
        }
    })
    .await?;
    Ok((started.elapsed(), now))
}

/// Polls until `member` is `Ready=True/MemberReady` and `CredentialsValid=True/CredentialsAccepted`
/// on the read API; returns how long that took.
///
/// # Errors
/// Not reaching both within `limit`.
pub async fn wait_healthy(
    collector: &RunningCollector,
    member: &str,
    limit: Duration,
) -> anyhow::Result<Duration> {
    let (took, _) = wait_condition(collector, member, "Ready", "True/MemberReady", limit).await?;
    let rest = limit.saturating_sub(took);
    let credentials = "True/CredentialsAccepted";
    wait_condition(collector, member, "CredentialsValid", credentials, rest).await?;
    Ok(took)
}

/// Creates Deployment `namespace/name` on `member` and waits until the collector mirrors it
/// as `member_name`: proof that its watches deliver. Returns how long mirroring took.
///
/// # Errors
/// API errors, or not mirrored within `limit`.
pub async fn create_and_wait_mirrored(
    collector: &RunningCollector,
    (member, member_name): (&Cluster, &str),
    namespace: &str,
    name: &str,
    limit: Duration,
) -> anyhow::Result<Duration> {
    Api::<Deployment>::namespaced(member.admin_client()?, namespace)
        .create(&PostParams::default(), &deployment(namespace, name, 1))
        .await?;
    let started = Instant::now();
    let path = format!("/api/v1/clusters/{member_name}/apps/v1/deployments");
    let what = format!("{member_name} mirrors {namespace}/{name}");
    eventually(&what, limit, || async {
        let list = collector.get_json(&path).await?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let mirrored = items
            .iter()
            .any(|d| d["metadata"]["name"] == name && d["metadata"]["namespace"] == namespace);
        anyhow::ensure!(mirrored, "{} other items", items.len());
        Ok(())
    })
    .await?;
    Ok(started.elapsed())
}

/// The sum of metric `name`'s samples for `member` (0 when it has none).
///
/// # Panics
/// The collector's `/metrics` failing.
pub async fn member_metric(collector: &RunningCollector, name: &str, member: &str) -> f64 {
    let selector = format!("member=\"{member}\"");
    let sum = collector.metric(name, &selector).await;
    let sum = sum.unwrap_or_else(|err| panic!("reading /metrics: {err:#}"));
    // No sample at all sums to -0.0.
    sum.abs()
}

/// `member`'s `Ready` (`status/reason`, or `absent`) every 200 ms until `done`: each distinct
/// value, in order.
pub async fn sample_ready(
    collector: &RunningCollector,
    member: &str,
    done: &AtomicBool,
) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    while !done.load(Ordering::Relaxed) {
        let now = condition(collector, member, "Ready")
            .await
            .map_or_else(|| "absent".to_owned(), |c| c.short());
        if seen.last() != Some(&now) {
            seen.push(now);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    seen
}

/// The current Unix time in seconds.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}
