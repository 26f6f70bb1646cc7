//! Readiness and `tether_member_source_listed` from the registry's sources: a collector that
//! cannot list its member definitions watches nothing new and notices no removal, so it says
//! so on `/readyz` instead of looking idle.

use std::collections::BTreeMap;

use cluster_registry::{Source, SourceState};
use tokio::sync::watch;

use super::Readiness;
use crate::metrics::Metrics;

/// The readiness input this module raises.
const INPUT: &str = "member-sources";

/// Follows `sources`; returns only when the registry (every handle and its driver) is gone.
pub(crate) async fn follow(
    mut sources: watch::Receiver<BTreeMap<Source, SourceState>>,
    readiness: Readiness,
    metrics: Metrics,
) {
    let mut last = None;
    loop {
        let states = sources.borrow_and_update().clone();
        for (source, state) in &states {
            metrics.set_source_listed(source, *state == SourceState::Listed);
        }
        let now = blocker(&states);
        if now != last {
            match &now {
                Some(reason) => {
                    tracing::warn!(%reason, "not ready");
                    readiness.block(INPUT, reason.clone());
                }
                None => {
                    tracing::info!("every source of member definitions is listed");
                    readiness.unblock(INPUT);
                }
            }
            last = now;
        }
        if sources.changed().await.is_err() {
            return;
        }
    }
}

/// Why the collector is not ready because of its sources, if it is not.
fn blocker(states: &BTreeMap<Source, SourceState>) -> Option<String> {
    let problems: Vec<String> = states
        .iter()
        .filter_map(|(source, state)| match state {
            SourceState::Listed => None,
            SourceState::Failing(err) => Some(format!("{source}: {err}")),
            _ => Some(format!("{source}: not listed yet")),
        })
        .collect();
    (!problems.is_empty())
        .then(|| format!("member definitions are not listed: {}", problems.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_listed_is_no_blocker() {
        let states = BTreeMap::from([
            (Source::KarmadaClusters, SourceState::Listed),
            (Source::ArgoCdSecrets("argocd".into()), SourceState::Listed),
        ]);
        assert_eq!(blocker(&states), None);
    }

    #[test]
    fn a_failing_or_unlisted_source_is_named_with_its_error() {
        let states = BTreeMap::from([
            (
                Source::KarmadaClusters,
                SourceState::Failing("clusters is forbidden".into()),
            ),
            (Source::ArgoCdSecrets("argocd".into()), SourceState::Listing),
        ]);
        let reason = blocker(&states).unwrap_or_default();
        assert!(
            reason.contains("Karmada Clusters: clusters is forbidden")
                && reason.contains("Argo CD cluster Secrets in namespace argocd: not listed yet"),
            "{reason}"
        );
    }
}
