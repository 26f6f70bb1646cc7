//! The one table the bench prints: a Markdown table, aligned so it also reads as plain text.

use std::{fmt::Write as _, time::Duration};

use crate::scale::percentiles::Percentiles;

/// One line of the table.
#[derive(Clone, Debug, Default)]
pub struct Row {
    /// What is measured.
    pub what: String,
    /// Tether's number.
    pub tether: String,
    /// The anchor's number, if there is one.
    pub anchor: String,
    /// anchor / Tether, if meaningful.
    pub ratio: String,
    /// The goal, if there is one.
    pub goal: String,
    /// `yes`, `NO`, or empty.
    pub met: String,
}

impl Row {
    /// A row with a number and nothing to compare it with.
    pub fn plain(what: impl Into<String>, tether: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            tether: tether.into(),
            ..Self::default()
        }
    }

    /// Adds a goal and whether it was met.
    #[must_use]
    pub fn goal(mut self, goal: impl Into<String>, met: bool) -> Self {
        self.goal = goal.into();
        self.met = if met { "yes" } else { "NO" }.to_owned();
        self
    }

    /// Adds an anchor and the ratio anchor / Tether.
    #[must_use]
    pub fn anchor(mut self, anchor: impl Into<String>, ratio: impl Into<String>) -> Self {
        self.anchor = anchor.into();
        self.ratio = ratio.into();
        self
    }
}

/// A titled group of rows.
#[derive(Clone, Debug, Default)]
pub struct Section {
    /// A short heading, a row of its own.
    pub title: String,
    /// How the section was measured, printed under the table.
    pub note: String,
    /// Its rows.
    pub rows: Vec<Row>,
}

/// Renders sections as one Markdown table; section titles are bold rows.
pub fn render(sections: &[Section]) -> String {
    let cells =
        |r: &Row| [&r.what, &r.tether, &r.anchor, &r.ratio, &r.goal, &r.met].map(String::clone);
    let mut lines = vec![cells(&Row {
        what: "measure".into(),
        tether: "Tether".into(),
        anchor: "anchor (another system)".into(),
        ratio: "ratio anchor/Tether".into(),
        goal: "goal".into(),
        met: "met".into(),
    })];
    for section in sections {
        lines.push(cells(&Row::plain(format!("**{}**", section.title), "")));
        lines.extend(section.rows.iter().map(cells));
    }
    let widths: [usize; 6] = std::array::from_fn(|i| {
        lines
            .iter()
            .map(|l| l[i].chars().count())
            .max()
            .unwrap_or(0)
    });
    lines.insert(1, widths.map(|w| "-".repeat(w)));
    let mut out = String::new();
    for line in lines {
        out.push('|');
        for (c, w) in line.iter().zip(widths) {
            let pad = w.saturating_sub(c.chars().count());
            let _ = write!(out, " {c}{} |", " ".repeat(pad));
        }
        out.push('\n');
    }
    out.push('\n');
    for section in sections.iter().filter(|s| !s.note.is_empty()) {
        let _ = writeln!(out, "{}: {}", section.title, section.note);
    }
    out
}

/// `12.3 s`, `45 ms`, `830 µs`.
pub fn duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 10.0 {
        format!("{s:.1} s")
    } else if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 0.001 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

/// `p50 / p99 / max`, with `—` for a rank not reached.
pub fn percentiles(p: &Percentiles) -> String {
    let one = |d: Option<Duration>| d.map_or_else(|| "—".to_owned(), duration);
    format!("{} / {} / {}", one(p.p50), one(p.p99), one(p.max))
}

/// `anchor / tether` as `12.3×`; `∞` when Tether's is zero and the anchor's is not.
pub fn ratio(anchor: f64, tether: f64) -> String {
    if tether == 0.0 {
        if anchor == 0.0 { "1×" } else { "∞" }.to_owned()
    } else {
        format!("{:.1}×", anchor / tether)
    }
}

/// Bytes as MiB.
pub fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_markdown() {
        let text = render(&[Section {
            title: "1. Scale".into(),
            note: "how".into(),
            rows: vec![Row::plain("all Ready", "41.0 s").goal("≤ 60 s", true)],
        }]);
        let lines: Vec<&str> = text.lines().take(4).collect();
        assert!(text.ends_with("1. Scale: how\n"), "{text}");
        assert!(lines[2].starts_with("| **1. Scale**"));
        assert!(lines[3].contains("| yes"));
        let width = lines[0].chars().count();
        assert!(lines.iter().all(|l| l.chars().count() == width), "{text}");
    }

    #[test]
    fn ratios_and_units() {
        assert_eq!(ratio(50.0, 0.0), "∞");
        assert_eq!(ratio(0.0, 0.0), "1×");
        assert_eq!(ratio(10.0, 4.0), "2.5×");
        assert_eq!(duration(Duration::from_millis(12)), "12.0 ms");
        assert_eq!(duration(Duration::from_secs(42)), "42.0 s");
    }
}
