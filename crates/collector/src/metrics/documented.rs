//! `docs/src/reference/metrics.md`: every family `/metrics` serves, with its type, labels and
//! HELP text, read from an encoded registry with a sample in each, never from a list kept here.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
};

use super::*;
use crate::reference::{assert_page_current, escape};

/// Families renamed in this release, by their name now and the one they had.
const FORMER_NAMES: &[(&str, &str)] = &[
    (
        "tether_credential_cache_hits_total",
        "tether_token_cache_hits_total",
    ),
    (
        "tether_credential_cache_misses_total",
        "tether_token_cache_misses_total",
    ),
    ("tether_token_mints_total", "tether_token_rotations_total"),
];

/// Metrics with a sample in every family, so that each shows its labels.
fn every_family_sampled() -> Metrics {
    let metrics = Metrics::new();
    let cache = CredentialCache::new(
        member_client::file_source::FileSource::new("/nonexistent/token"),
        member_client::CredentialCacheConfig::default(),
    );
    metrics.watch_credential_cache("members", cache);
    metrics.watch_registry(
        cluster_registry::RegistryBuilder::new().build().0,
        MembersFrom::Karmada,
    );
    let health = CredentialHealth::new();
    // A JWT with an `exp`, so that the member has an expiry.
    let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjIwMDAwMDAwMDB9.c2ln";
    let credential = member_client::Credential::from_token_bytes(jwt.as_bytes());
    health.using(&credential.expect("a JWT"));
    metrics.watch_member("m1", health);
    metrics.record_relist("m1", "apps/v1/deployments");
    metrics.record_watch_error("m1", "apps/v1/deployments", FailureKind::Unreachable);
    metrics.record_token_mint("m1", "success");
    metrics.set_member_ready("m1", true);
    metrics.observe_rotation_to_use(Duration::from_millis(40));
    metrics.set_source_listed(&cluster_registry::Source::KarmadaClusters, true);
    metrics.set_leader(true);
    metrics.set_shard("replica-0", 1, 1);
    metrics.record_shard_moves("in", 1);
    metrics
}

/// A family's type, HELP text and the labels of its samples.
type Family = (String, String, BTreeSet<String>);

/// The families of `text` (OpenMetrics) by the name a query uses (a counter's with `_total`),
/// with the labels of their samples (a histogram's `le` left out). A HELP line comes just
/// before its TYPE line.
fn families(text: &str) -> BTreeMap<String, Family> {
    let (mut families, mut samples, mut help) = (BTreeMap::new(), BTreeMap::new(), "");
    for line in text.lines() {
        if let Some(described) = line.strip_prefix("# HELP ") {
            help = described.split_once(' ').map_or("", |(_, help)| help);
        } else if let Some(typed) = line.strip_prefix("# TYPE ") {
            let (name, kind) = typed.split_once(' ').unwrap();
            let queried = format!("{name}{}", if kind == "counter" { "_total" } else { "" });
            let family = (kind.to_owned(), help.to_owned(), BTreeSet::new());
            families.insert(queried.clone(), family);
            for suffix in ["", "_total", "_bucket", "_sum", "_count", "_created"] {
                samples.insert(format!("{name}{suffix}"), queried.clone());
            }
        } else if !line.starts_with('#') {
            let sample = line.split(['{', ' ']).next().unwrap_or(line);
            let labels = line.split_once('{').map_or("", |(_, labels)| labels);
            let labels = labels
                .split(',')
                .filter_map(|pair| Some(pair.split_once('=')?.0));
            let family = families.get_mut(&samples[sample]).unwrap();
            family
                .2
                .extend(labels.filter(|label| *label != "le").map(str::to_owned));
        }
    }
    families
}

fn render(families: &BTreeMap<String, Family>) -> String {
    let mut page = String::from(
        "# Metrics\n\n\
         The collector serves these families on `/metrics` (`--listen`), as OpenMetrics text. \
         A counter is named here as a query names it, with `_total`.\n\n\
         | metric | type | labels | meaning |\n| --- | --- | --- | --- |\n",
    );
    for (name, (kind, help, labels)) in families {
        let former = FORMER_NAMES.iter().find(|(now, _)| now == name);
        let former = former.map(|(_, old)| format!(" (formerly `{old}`)"));
        let labels: Vec<String> = labels.iter().map(|label| format!("`{label}`")).collect();
        let (former, labels, help) = (former.unwrap_or_default(), labels.join(", "), escape(help));
        let _ = writeln!(page, "| `{name}`{former} | {kind} | {labels} | {help} |");
    }
    page
}

#[test]
fn the_metrics_page_is_current() {
    let families = families(&every_family_sampled().encode().unwrap());
    assert!(
        families.len() > 20 && families.values().any(|family| !family.2.is_empty()),
        "the registry lost its families"
    );
    for (now, old) in FORMER_NAMES {
        assert!(
            families.contains_key(*now),
            "{now}, renamed from {old}, is not served"
        );
        assert!(
            !families.contains_key(*old),
            "{old} is a former name, but is served"
        );
    }
    let source = "the collector's metrics registry by crates/collector/src/metrics/documented.rs";
    assert_page_current("metrics.md", source, "metrics", &render(&families));
}
