//! Just enough of the Prometheus text format to sum samples: `name{labels} value`.

/// One sample: metric name, labels, value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The metric name, e.g. `apiserver_request_total`.
    pub name: String,
    /// Label pairs in order.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if present.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Every sample in `text`; comments and lines that do not parse are skipped.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

/// The sum of the samples of `name` whose labels include every pair in `with`.
pub fn sum(text: &str, name: &str, with: &[(&str, &str)]) -> f64 {
    parse(text)
        .iter()
        .filter(|s| s.name == name && with.iter().all(|(k, v)| s.label(k) == Some(*v)))
        .map(|s| s.value)
        .sum()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
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
        rest = tail;
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
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

/// Parses `k="v",k2="v2"}` and returns the pairs and what follows the `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if let Some(tail) = s.strip_prefix('}') {
            return Some((labels, tail));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_owned();
        s = s[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => {
                    let (_, escaped) = chars.next()?;
                    value.push(match escaped {
                        'n' => '\n',
                        other => other,
                    });
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
tether_token_fetches_total{cache="members"} 2000
tether_token_fetches_total{cache="self"} 7
"#;

    #[test]
    fn sums_with_label_filters() {
        assert_eq!(sum(TEXT, "apiserver_request_total", &[]), 15.0);
        assert_eq!(
            sum(TEXT, "apiserver_longrunning_requests", &[("verb", "WATCH")]),
            5.0
        );
        assert_eq!(sum(TEXT, "tether_members", &[]), 1000.0);
        assert_eq!(
            sum(TEXT, "tether_token_fetches_total", &[("cache", "members")]),
            2000.0
        );
    }

    #[test]
    fn quoted_commas_and_escapes_stay_in_values() {
        let samples = parse(r#"m{a="x,y\"z",b="2"} 1.5"#);
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].label("a"), Some("x,y\"z"));
        assert_eq!(samples[0].label("b"), Some("2"));
        assert_eq!(samples[0].value, 1.5);
    }
}
