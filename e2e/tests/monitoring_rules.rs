//! The shipped alerts and dashboard, checked without a cluster: the chart's rules are the rule
//! file, every alert is complete and its runbook is the book's page for it, `promtool test rules`
//! passes (series that must fire and series that must not), and the dashboard's queries parse.

mod monitoring_support;

use std::process::Command;

use e2e::manifest::{chart_dir, of_kind, parse_documents};
use monitoring_support::{
    ALERTS, BookLink, book_pages, dashboard, dashboard_queries, prometheus_dir, rule_list, rules,
    run_promtool,
};
use serde_json::{Value, json};

#[test]
fn the_charts_rules_are_the_shipped_rule_file() {
    let shipped = std::fs::read_to_string(prometheus_dir().join("tether-rules.yaml")).unwrap();
    let copy = std::fs::read_to_string(chart_dir().join("files/tether-rules.yaml")).unwrap();
    assert!(
        copy == shipped,
        "deploy/helm/tether/files/ holds stale rules: \
         cp deploy/prometheus/tether-rules.yaml deploy/helm/tether/files/"
    );
}

#[test]
fn every_alert_has_a_severity_a_summary_a_description_and_a_runbook_page_in_the_book() {
    let rules = rules().unwrap();
    let rules = rule_list(&rules);
    let names: Vec<_> = rules.iter().filter_map(|r| r["alert"].as_str()).collect();
    assert_eq!(names, ALERTS);
    let pages = book_pages().unwrap();
    for rule in rules {
        let name = rule["alert"].as_str().unwrap();
        assert!(
            ["critical", "warning", "info"].contains(&rule["labels"]["severity"].as_str().unwrap()),
            "{name}: severity"
        );
        for key in ["summary", "description"] {
            let text = rule["annotations"][key].as_str().unwrap_or_default();
            assert!(!text.trim().is_empty(), "{name}: no {key}");
        }
        let url = rule["annotations"]["runbook_url"].as_str().unwrap();
        let link = BookLink::parse(url).unwrap_or_else(|e| panic!("{name}: runbook: {e:#}"));
        assert!(
            link.page.starts_with("operations/runbooks/") && link.anchor.is_none(),
            "{name}: runbook {url} is not a runbook page of its own"
        );
        assert!(
            pages.contains(&link.page),
            "{name}: docs/src/SUMMARY.md does not list its runbook {}",
            link.page
        );
        let headings = link.headings().unwrap();
        assert_eq!(
            headings.first().map(String::as_str),
            Some(name),
            "{name}: its runbook {} is titled otherwise",
            link.page
        );
    }
}

#[test]
fn the_dashboards_links_resolve_to_book_pages() {
    let dashboard = dashboard().unwrap();
    let pages = book_pages().unwrap();
    let links = dashboard["links"].as_array().unwrap();
    assert!(!links.is_empty(), "the dashboard links no runbook");
    for link in links {
        let url = link["url"].as_str().unwrap();
        let page = BookLink::parse(url).unwrap();
        assert!(page.resolves().unwrap(), "{url}: no such heading");
        assert!(pages.contains(&page.page), "{url}: not in SUMMARY.md");
    }
}

#[test]
fn promtool_checks_the_rules_and_their_tests_pass() {
    let prometheus = prometheus_dir();
    run_promtool(&prometheus, &["check", "rules", "tether-rules.yaml"], None).unwrap();
    let tests = ["test", "rules", "tether-rules.test.yaml"];
    let output = run_promtool(&prometheus.join("tests"), &tests, None).unwrap();
    assert!(String::from_utf8_lossy(&output.stdout).contains("SUCCESS"));
}

/// Grafana's variables, as a query at evaluation time would have them.
fn substitute_variables(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__range", "1h")
        .replace("$job", ".*")
}

#[test]
fn every_dashboard_query_is_valid_promql() {
    let dashboard = dashboard().unwrap();
    // promtool parses PromQL in rule files: each panel query becomes a recording rule.
    let records: Vec<Value> = dashboard_queries(&dashboard)
        .into_iter()
        .filter(|(at, _)| at.starts_with("panel"))
        .enumerate()
        .map(|(i, (at, expr))| {
            let expr = substitute_variables(&expr);
            assert!(!expr.contains('$'), "{at}: unknown variable in {expr}");
            json!({"record": format!("dashboard:query_{i}"), "expr": expr})
        })
        .collect();
    assert!(records.len() >= 5, "the dashboard has a query per panel");
    let dir = tempfile::tempdir().unwrap();
    let file = json!({"groups": [{"name": "dashboard", "rules": records}]});
    std::fs::write(
        dir.path().join("dashboard.yaml"),
        serde_yaml::to_string(&file).unwrap(),
    )
    .unwrap();
    run_promtool(dir.path(), &["check", "rules", "dashboard.yaml"], None).unwrap();
}

fn helm_template(set: &[&str]) -> Vec<Value> {
    let helm = testkit::tools::binary("helm").unwrap();
    let mut command = Command::new(helm);
    command.args(["template", "tether"]).arg(chart_dir());
    for value in set {
        command.args(["--set", value]);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    parse_documents(&String::from_utf8(output.stdout).unwrap(), "helm template").unwrap()
}

#[test]
fn the_chart_renders_the_rules_as_a_prometheusrule_only_when_enabled() {
    let objects = helm_template(&[]);
    let rules_off = of_kind(&objects, "PrometheusRule");
    assert_eq!(rules_off.count(), 0, "off by default");

    let objects = helm_template(&[
        "prometheusRule.enabled=true",
        "prometheusRule.labels.release=monitoring",
    ]);
    let [rule] = of_kind(&objects, "PrometheusRule").collect::<Vec<_>>()[..] else {
        panic!("one PrometheusRule")
    };
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["metadata"]["labels"]["release"], "monitoring");
    assert_eq!(
        rule["metadata"]["labels"]["app.kubernetes.io/name"], "tether",
        "the chart's own labels stay"
    );
    // The alert templates (`{{ $labels.member }}`) reach Prometheus as written, not rendered by
    // Helm.
    assert_eq!(rule["spec"]["groups"], rules().unwrap()["groups"]);
}

#[test]
fn metric_names_are_read_from_promql_and_label_values_are_not() {
    let names = monitoring_support::metric_names(
        r#"sum(increase(tether_token_invalidations_total{cache="tether_not_a_metric"}[5m]))
           + on () group_left tether_leader offset 1h or vector(0)"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["tether_leader", "tether_token_invalidations_total"]
    );
}

#[test]
fn an_exposition_offers_its_families_sample_names_even_without_samples() {
    let text = "# HELP tether_relists Relists.\n# TYPE tether_relists counter\n\
                # TYPE tether_rotation_to_use_seconds histogram\n# UNIT tether_rotation_to_use_seconds seconds\n\
                tether_rotation_to_use_seconds_count 0\n# TYPE tether_members gauge\ntether_members 2\n# EOF\n";
    let names = testkit::metrics::Exposition::parse(text).series_names();
    for name in [
        "tether_relists_total",
        "tether_rotation_to_use_seconds_bucket",
        "tether_members",
    ] {
        assert!(names.contains(name), "{name} in {names:?}");
    }
    assert!(
        !names.contains("tether_relists"),
        "a counter's samples end in _total"
    );
    let converted = monitoring_support::openmetrics_as_prometheus_text(text);
    assert!(converted.starts_with(
        "# HELP tether_relists_total Relists.\n# TYPE tether_relists_total counter\n"
    ));
    assert!(!converted.contains("# EOF") && !converted.contains("# UNIT"));
}
