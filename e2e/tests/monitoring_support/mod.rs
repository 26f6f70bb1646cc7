//! What the monitoring tests share: the shipped rule file and dashboard, the metric names their
//! PromQL uses, and promtool.

#![allow(dead_code, reason = "each test binary uses part of this module")]

use std::{
    collections::BTreeSet,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use anyhow::{Context as _, ensure};
use e2e::manifest::repo_root;
use serde_json::Value;
use testkit::metrics::Exposition;

/// Where every runbook and dashboard link points: a page of the book's sources on GitHub.
pub const BOOK_URL: &str = "https://github.com/tether-dev/tether/blob/main/docs/src/";

/// The alerts the rule file must define, in its order.
pub const ALERTS: [&str; 6] = [
    "TetherCredentialUnauthorized",
    "TetherCredentialExpiringSoon",
    "TetherMemberUnreachable",
    "TetherRelistsAfterRotation",
    "TetherNoLeader",
    "TetherSourceNotListed",
];

/// `deploy/prometheus`: the rule file `tether-rules.yaml`, and the `promtool test rules`
/// cases in `tests/`.
pub fn prometheus_dir() -> PathBuf {
    repo_root().join("deploy/prometheus")
}

/// The rule file as JSON.
pub fn rules() -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(prometheus_dir().join("tether-rules.yaml"))?;
    Ok(serde_yaml::from_str(&text)?)
}

/// The dashboard, `deploy/grafana/tether.json`.
pub fn dashboard() -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(repo_root().join("deploy/grafana/tether.json"))?;
    Ok(serde_json::from_str(&text)?)
}

/// Every rule of every group.
pub fn rule_list(rules: &Value) -> Vec<&Value> {
    rules["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["rules"].as_array().into_iter().flatten())
        .collect()
}

/// Every PromQL query of the dashboard, with where it is: the panels' `expr`s and the
/// template variables' queries (`label_values(metric, label)` included, for its metric).
pub fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                let at = format!("panel {} target {}", panel["title"], target["refId"]);
                queries.push((at, expr.to_owned()));
            }
        }
    }
    let variables = dashboard["templating"]["list"].as_array();
    for var in variables.into_iter().flatten() {
        if let Some(query) = var["query"]["query"].as_str() {
            queries.push((format!("variable {}", var["name"]), query.to_owned()));
        }
    }
    queries
}

/// The `tether_` metric names a PromQL expression selects. String literals (label values such
/// as `cache="members"`) are skipped; no label name starts with `tether_`.
pub fn metric_names(promql: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut chars = promql.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c == '"' || c == '\'' || c == '`' {
            // Up to the closing quote; a backslash escapes the next character.
            while let Some((_, inner)) = chars.next() {
                if inner == '\\' {
                    chars.next();
                } else if inner == c {
                    break;
                }
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let mut end = start + c.len_utf8();
            while let Some(&(i, next)) = chars.peek() {
                if !(next.is_ascii_alphanumeric() || next == '_' || next == ':') {
                    break;
                }
                end = i + next.len_utf8();
                chars.next();
            }
            let word = &promql[start..end];
            if word.starts_with("tether_") {
                names.insert(word.to_owned());
            }
        }
    }
    names
}

/// An OpenMetrics exposition in Prometheus' text format, which `promtool check metrics` reads:
/// a counter family `x` (samples `x_total`) is described as `x_total`, and the `# UNIT` and
/// `# EOF` lines, which that format lacks, are dropped. The samples are unchanged.
pub fn openmetrics_as_prometheus_text(text: &str) -> String {
    let families = Exposition::parse(text).families;
    let counters: BTreeSet<&str> = families
        .iter()
        .filter(|(_, kind)| *kind == "counter")
        .map(|(name, _)| name.as_str())
        .collect();
    let mut converted = String::with_capacity(text.len());
    for line in text.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let described = ["# HELP ", "# TYPE "].into_iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        converted.push_str(described.as_deref().unwrap_or(line));
        converted.push('\n');
    }
    converted
}

/// mdBook's (and GitHub's) anchor for a Markdown heading: lower case, spaces to `-`,
/// punctuation dropped.
pub fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// A page of the book that a link under [`BOOK_URL`] names, as a path under `docs/src`, with
/// the anchor after `#` if any.
pub struct BookLink {
    /// The page, relative to `docs/src`.
    pub page: String,
    /// The heading's anchor, if the link names one.
    pub anchor: Option<String>,
}

impl BookLink {
    /// The link `url`, or an error naming it if it is not a page of the book.
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        let rest = url
            .strip_prefix(BOOK_URL)
            .with_context(|| format!("{url} is not under {BOOK_URL}"))?;
        let (page, anchor) = rest.split_once('#').map_or((rest, None), |(page, anchor)| {
            (page, Some(anchor.to_owned()))
        });
        ensure!(page.ends_with(".md"), "{url} names no Markdown page");
        Ok(Self {
            page: page.to_owned(),
            anchor,
        })
    }

    /// The page's headings, by text (without the `#`s), in order; an error if the page does
    /// not exist.
    pub fn headings(&self) -> anyhow::Result<Vec<String>> {
        let path = book_dir().join(&self.page);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("the book has no page {}", self.page))?;
        let mut in_code = false;
        let mut headings = Vec::new();
        for line in text.lines() {
            if line.starts_with("```") {
                in_code = !in_code;
            } else if !in_code && let Some(heading) = line.strip_prefix('#') {
                headings.push(heading.trim_start_matches('#').trim().to_owned());
            }
        }
        Ok(headings)
    }

    /// Whether the page exists and, if the link names an anchor, has a heading of that anchor.
    pub fn resolves(&self) -> anyhow::Result<bool> {
        let headings = self.headings()?;
        Ok((self.anchor.as_ref())
            .is_none_or(|wanted| headings.iter().any(|h| &anchor(h) == wanted)))
    }
}

/// `docs/src`: the book's pages and its `SUMMARY.md`.
pub fn book_dir() -> PathBuf {
    repo_root().join("docs/src")
}

/// The pages `SUMMARY.md` lists, relative to `docs/src`: a page it does not list is not in
/// the built book.
pub fn book_pages() -> anyhow::Result<BTreeSet<String>> {
    let summary = std::fs::read_to_string(book_dir().join("SUMMARY.md"))?;
    Ok(summary
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')'))
        .map(|(page, _)| page.to_owned())
        .collect())
}

/// Runs promtool (built by `hack/tools.sh` at its pinned version) with `args` in `dir`, with `stdin` as its input, and fails with its output
/// unless it succeeds.
pub fn run_promtool(dir: &Path, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Output> {
    let promtool = testkit::tools::binary("promtool")?;
    let mut child = Command::new(&promtool)
        .args(args)
        .current_dir(dir)
        .stdin(stdin.map_or_else(Stdio::null, |_| Stdio::piped()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", promtool.display()))?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes())?;
    }
    let output = child.wait_with_output()?;
    ensure!(
        output.status.success(),
        "promtool {}: {}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(output)
}
