//! The dashboard and the alerts query what a real collector exports: the collector watches a
//! real member apiserver, its live `/metrics` is scraped with a reader's token, and every metric
//! name in the dashboard's queries and the rules' expressions must be in that exposition, which
//! `promtool check metrics` must accept.

mod monitoring_support;

use std::collections::BTreeMap;

use e2e::{limits::PROBE, scenario::Scenario};
use monitoring_support::{
    dashboard, dashboard_queries, metric_names, openmetrics_as_prometheus_text, rule_list, rules,
    run_promtool,
};
use testkit::metrics::Exposition;

#[tokio::test]
async fn dashboard_and_rules_query_only_metrics_a_live_collector_exports() -> anyhow::Result<()> {
    let s = Scenario::start_healthy(1, PROBE).await?;
    let (status, text) = s.collector.get("/metrics").await?;
    assert_eq!(status, 200, "{text}");

    // What this scenario must show of its own member: the samples behind the new panels.
    let lines: Vec<&str> = text.lines().collect();
    let starting = |prefix: &str| lines.iter().find(|l| l.starts_with(prefix)).copied();
    let info = starting(r#"tether_member_info{member="member1""#)
        .unwrap_or_else(|| panic!("no tether_member_info for member1 in\n{text}"));
    assert_eq!(
        info,
        r#"tether_member_info{member="member1",source="karmada",endpoint_host="127.0.0.1",kind="token"} 1"#
    );
    assert!(starting("tether_build_info{version=").is_some());
    assert!(lines.contains(&"tether_leader 1"), "{text}");
    assert!(
        starting(r#"tether_credential_expiry_timestamp_seconds{member="member1"}"#).is_some(),
        "the minted token's exp is exported: {text}"
    );

    // Every name a query selects, and where.
    let mut used: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let rules = rules()?;
    let alerts = rule_list(&rules).into_iter().map(|rule| {
        let expr = rule["expr"].as_str().unwrap().to_owned();
        (format!("alert {}", rule["alert"]), expr)
    });
    let panels = dashboard_queries(&dashboard()?).into_iter();
    for (at, query) in alerts.chain(panels.map(|(at, q)| (format!("dashboard {at}"), q))) {
        for name in metric_names(&query) {
            used.entry(name).or_default().push(at.clone());
        }
    }
    assert!(
        used.len() >= 10,
        "the parser found the queries' metrics: {used:?}"
    );
    let exposed = Exposition::parse(&text).series_names();
    let missing: Vec<_> = used
        .iter()
        .filter(|(name, _)| !exposed.contains(*name))
        .collect();
    assert!(
        missing.is_empty(),
        "queried but not exported: {missing:?}\nexported: {exposed:?}"
    );

    // promtool lints names, help and types, in the Prometheus text format.
    let prometheus_text = openmetrics_as_prometheus_text(&text);
    let check = ["check", "metrics"];
    run_promtool(std::path::Path::new("."), &check, Some(&prometheus_text))
        .unwrap_or_else(|err| panic!("{err:#}\n{text}"));
    Ok(())
}
