//! Every family `/metrics` serves is in the README's metrics table with its labels, and every
//! `tether_` name the README mentions is one `/metrics` serves, or the former name of one that
//! the table gives.
//!
//! The families are read from an encoded registry with a sample in each, never from a list
//! kept here.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

#[path = "../../tests/readme/mod.rs"]
#[allow(dead_code, reason = "its flag helpers serve tests/documented.rs")]
mod readme;

/// The README section that documents the families.
const METRICS: &str = "Metrics (`/metrics`, OpenMetrics)";

/// A family's name as a query writes it, with its labels.
type Families = BTreeMap<String, BTreeSet<String>>;

/// Metrics with a sample in every family, so that each shows its labels.
fn every_family_sampled() -> Metrics {
    let metrics = Metrics::new();
    let cache = CredentialCache::new(
        member_client::FileSource::new("/nonexistent/token"),
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

/// The families of `text` (OpenMetrics) by the name a query uses (a counter's with `_total`),
/// with the labels of their samples (a histogram's `le` left out).
fn families(text: &str) -> Families {
    let mut families = Families::new();
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if let Some(typed) = line.strip_prefix("# TYPE ") {
            let (name, kind) = typed.split_once(' ').expect("# TYPE name type");
            let queried = match kind {
                "counter" => format!("{name}_total"),
                _ => name.to_owned(),
            };
            families.insert(queried.clone(), BTreeSet::new());
            for suffix in ["", "_total", "_bucket", "_sum", "_count", "_created"] {
                samples.insert(format!("{name}{suffix}"), queried.clone());
            }
        } else if !line.starts_with('#') {
            let sample = line.split(['{', ' ']).next().unwrap_or(line);
            let labels = line.split_once('{').map_or("", |(_, labels)| labels);
            let family = samples.get(sample).expect("a sample of a typed family");
            let labels = labels.split(',').filter_map(|pair| pair.split_once('='));
            families.entry(family.clone()).or_default().extend(
                labels
                    .map(|(label, _)| label.to_owned())
                    .filter(|label| label != "le"),
            );
        }
    }
    families
}

/// `cell` split into what is outside parentheses and what is inside them.
fn parenthesized(cell: &str) -> (String, String) {
    let (mut outside, mut inside, mut depth) = (String::new(), String::new(), 0_u32);
    for c in cell.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if depth == 0 => outside.push(c),
            c => inside.push(c),
        }
    }
    (outside, inside)
}

/// The metrics table: each family's name with the labels its row names, and the former names
/// of renamed families. Inside parentheses a row gives a label's values, or a family's former
/// name (`` `tether_new_total` (formerly `tether_old_total`) ``).
fn documented(section: &str) -> (Families, BTreeSet<String>) {
    let (mut documented, mut former) = (Families::new(), BTreeSet::new());
    for row in readme::rows(section) {
        let (names, labels) = (row.first().copied(), row.get(1).copied());
        let (names, old) = parenthesized(names.unwrap_or_default());
        let labels: BTreeSet<String> =
            readme::code_spans(&parenthesized(labels.unwrap_or_default()).0)
                .into_iter()
                .map(str::to_owned)
                .collect();
        for name in readme::code_spans(&names) {
            documented.insert(name.to_owned(), labels.clone());
        }
        former.extend(readme::code_spans(&old).into_iter().map(str::to_owned));
    }
    (documented, former)
}

#[test]
fn every_family_is_documented_with_its_labels_and_every_documented_one_is_served() {
    let served = families(&every_family_sampled().encode().expect("encoded"));
    assert!(
        served.len() > 20 && served.values().any(|labels| !labels.is_empty()),
        "the registry lost its families: {served:?}"
    );
    let readme = readme::text();
    let (documented, former) = documented(readme::section(&readme, METRICS));
    let mut problems = Vec::new();
    for (name, labels) in &served {
        match documented.get(name) {
            None => problems.push(format!("{name} (labels {labels:?}) is not in the table")),
            Some(written) if written != labels => problems.push(format!(
                "{name}: the table says labels {written:?}, /metrics has {labels:?}"
            )),
            Some(_) => {}
        }
    }
    for name in documented.keys().filter(|name| !served.contains_key(*name)) {
        problems.push(format!(
            "{name} is in the table, but /metrics has no such family"
        ));
    }
    for name in former.iter().filter(|name| served.contains_key(*name)) {
        problems.push(format!(
            "{name} is given as a former name, but /metrics serves it"
        ));
    }
    assert!(
        problems.is_empty(),
        "the README's \"{METRICS}\" table does not match /metrics:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_tether_name_the_readme_mentions_is_served() {
    let text = every_family_sampled().encode().expect("encoded");
    let served = families(&text);
    let samples: BTreeSet<&str> = text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split(['{', ' ']).next())
        .collect();
    let readme = readme::text();
    let (_, former) = documented(readme::section(&readme, METRICS));
    let mentioned = readme::names(&readme, "tether_", |c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
    });
    assert!(mentioned.len() > 20, "no metric names found: {mentioned:?}");
    let unknown: Vec<_> = mentioned
        .iter()
        .filter(|name| !served.contains_key(**name) && !samples.contains(**name))
        .filter(|name| !former.contains(**name))
        .collect();
    assert!(
        unknown.is_empty(),
        "the README names metrics /metrics does not serve: {unknown:?}"
    );
}
