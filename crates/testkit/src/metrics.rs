//! The one reader of `/metrics` in the tests: the Prometheus and OpenMetrics text formats, as
//! the collector and kube-apiserver expose them, read into families and samples.
//!
//! A sample is `name{label="value",...} value [timestamp]`; a `# TYPE family kind` line
//! declares a family, whose samples are named for it plus the suffixes its kind gives them
//! (a counter `x` has samples `x_total`). Label values keep their escapes' meaning (`\"`,
//! `\\`, `\n`) and may hold commas and braces.

use std::collections::{BTreeMap, BTreeSet};

/// One sample: series name, labels, value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The sample's name, e.g. `apiserver_request_total`.
    pub name: String,
    /// Its label pairs, in order.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if the sample has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the sample has every pair of `selector`.
    fn has_all(&self, selector: &[(String, String)]) -> bool {
        selector.iter().all(|(k, v)| self.label(k) == Some(v))
    }
}

/// An exposition: its families' kinds and its samples.
#[derive(Clone, Debug, Default)]
pub struct Exposition {
    /// Family name → kind (`counter`, `gauge`, `histogram`, ...), from the `# TYPE` lines.
    pub families: BTreeMap<String, String>,
    /// Every sample, in order.
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// Reads `text`. Comments other than `# TYPE`, and lines that are not samples, are
    /// skipped.
    pub fn parse(text: &str) -> Self {
        let mut exposition = Self::default();
        for line in text.lines().map(str::trim) {
            if let Some(typed) = line.strip_prefix("# TYPE ") {
                let mut words = typed.split_whitespace();
                if let (Some(name), Some(kind)) = (words.next(), words.next()) {
                    exposition.families.insert(name.to_owned(), kind.to_owned());
                }
            } else if let Some(sample) = parse_sample(line) {
                exposition.samples.push(sample);
            }
        }
        exposition
    }

    /// The sum of the samples named `name` that carry every label of `selector`, written as
    /// inside a PromQL selector's braces (`member="member1",result="success"`; empty for
    /// all). 0 when none does.
    ///
    /// # Panics
    /// `selector` not being `key="value"` pairs: a test's own typo must not read as "no
    /// samples".
    pub fn sum(&self, name: &str, selector: &str) -> f64 {
        let wanted = parse_selector(selector);
        self.samples
            .iter()
            .filter(|s| s.name == name && s.has_all(&wanted))
            .fold(0.0, |sum, s| sum + s.value)
    }

    /// The series names the exposition offers: every sample's, and for every family the names
    /// its kind gives its samples, so that a counter nothing has counted yet still offers
    /// `<name>_total`.
    pub fn series_names(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self.samples.iter().map(|s| s.name.clone()).collect();
        for (family, kind) in &self.families {
            let suffixes: &[&str] = match kind.as_str() {
                "counter" => &["_total", "_created"],
                "histogram" => &["_bucket", "_count", "_sum", "_created"],
                "summary" => &["", "_count", "_sum", "_created"],
                "info" => &["_info"],
                "stateset" | "gaugehistogram" => &["", "_bucket", "_gcount", "_gsum"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{family}{s}")));
        }
        names
    }
}

/// [`Exposition::sum`] of `text`.
///
/// # Panics
/// As [`Exposition::sum`].
pub fn sum(text: &str, name: &str, selector: &str) -> f64 {
    Exposition::parse(text).sum(name, selector)
}

fn parse_selector(selector: &str) -> Vec<(String, String)> {
    if selector.trim().is_empty() {
        return Vec::new();
    }
    match parse_labels(selector) {
        Some((pairs, "")) => pairs,
        _ => panic!("not a label selector: {selector:?}"),
    }
}

fn parse_sample(line: &str) -> Option<Sample> {
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_owned();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, tail) = parse_labels(after)?;
        labels = parsed;
        rest = tail.strip_prefix('}')?;
    }
    let value = match rest.split_whitespace().next()? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// Reads `k="v",k2="v2"` up to a `}` or the end, and returns the pairs and the rest (from the
/// `}` on).
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if s.is_empty() || s.starts_with('}') {
            return Some((labels, s));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_owned();
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => {
                    let (_, escaped) = chars.next()?;
                    value.push(if escaped == 'n' { '\n' } else { escaped });
                }
                '"' => break i,
                other => value.push(other),
            }
        };
        labels.push((key, value));
        s = &s[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP x
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",verb="GET",resource="nodes"} 12
apiserver_request_total{code="201",verb="POST",resource="x,y"} 3
apiserver_longrunning_requests{verb="WATCH",resource="deployments"} 5
apiserver_longrunning_requests{verb="CONNECT",resource="pods"} 1
tether_members 1000
tether_token_fetches_total{cache="members"} 2000 1700000000
tether_token_fetches_total{cache="self"} 7
tether_token_fetches_total{cache="membersx"} 100
# EOF
"#;

    #[test]
    fn sums_the_samples_that_carry_every_selected_label() {
        assert_eq!(sum(TEXT, "apiserver_request_total", ""), 15.0);
        assert_eq!(
            sum(TEXT, "apiserver_longrunning_requests", r#"verb="WATCH""#),
            5.0
        );
        assert_eq!(sum(TEXT, "tether_members", ""), 1000.0);
        assert_eq!(
            sum(TEXT, "tether_token_fetches_total", r#"cache="members""#),
            2000.0,
            "a timestamp is not the value, and a longer label value is another value"
        );
        assert_eq!(
            sum(TEXT, "apiserver_request_total", r#"code="200", verb="GET""#),
            12.0
        );
        let none = sum(TEXT, "tether_members", r#"member="x""#);
        assert!(none == 0.0 && none.is_sign_positive(), "{none}");
    }

    #[test]
    fn quoted_commas_braces_and_escapes_stay_in_values() {
        let exposition = Exposition::parse(r#"m{a="x,y\"z}",b="2\\n"} 1.5"#);
        let [sample] = exposition.samples.as_slice() else {
            panic!("{exposition:?}");
        };
        assert_eq!(sample.label("a"), Some("x,y\"z}"));
        assert_eq!(sample.label("b"), Some("2\\n"));
        assert_eq!(sample.value, 1.5);
    }

    #[test]
    #[should_panic(expected = "not a label selector")]
    fn a_malformed_selector_is_refused_not_read_as_no_samples() {
        sum(TEXT, "tether_members", "member=member1");
    }

    #[test]
    fn families_offer_the_names_their_kind_gives_their_samples() {
        let text = "# HELP tether_relists Relists.\n# TYPE tether_relists counter\n\
                    # TYPE tether_rotation_to_use_seconds histogram\n\
                    tether_rotation_to_use_seconds_count 0\n# TYPE tether_members gauge\n\
                    tether_members 2\n# EOF\n";
        let exposition = Exposition::parse(text);
        assert_eq!(exposition.families["tether_relists"], "counter");
        let names = exposition.series_names();
        for name in [
            "tether_relists_total",
            "tether_rotation_to_use_seconds_bucket",
            "tether_rotation_to_use_seconds_count",
            "tether_members",
        ] {
            assert!(names.contains(name), "{name} in {names:?}");
        }
        assert!(!names.contains("tether_relists"));
    }
}
