//! The README as the documentation tests read it: its sections, the rows of its tables, and the
//! names (flags, variables, metric families) it mentions.
//!
//! Shared by the flag test (`tests/documented.rs`) and the metric test, a unit test of the
//! crate's private metrics (`src/metrics/documented.rs`), which includes this file by path.

use std::collections::BTreeSet;

/// The repository's README.
pub fn text() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{path}: {err}"))
}

/// The body of the `## {heading}` section, its `###` subsections included: every line up to
/// the next `## ` heading. Lines of fenced code blocks are never taken for headings.
pub fn section<'a>(readme: &'a str, heading: &str) -> &'a str {
    let mut in_code = false;
    let mut start = None;
    let mut offset = 0;
    for line in readme.split_inclusive('\n') {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with("## ") {
            match start {
                Some(start) => return &readme[start..offset],
                None if line[3..].trim_end() == heading => start = Some(offset + line.len()),
                None => {}
            }
        }
        offset += line.len();
    }
    let start = start.unwrap_or_else(|| panic!("the README has no section `## {heading}`"));
    &readme[start..]
}

/// The cells of every table row of `text`, trimmed; the `| --- |` separators left out. A `|`
/// inside a code span does not split a cell.
pub fn rows(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix('|'))
        .filter(|line| !line.trim_start().starts_with("---"))
        .map(|line| {
            let (mut cells, mut start, mut in_code) = (Vec::new(), 0, false);
            for (i, c) in line.char_indices() {
                match c {
                    '`' => in_code = !in_code,
                    '|' if !in_code => {
                        cells.push(line[start..i].trim());
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            cells
        })
        .collect()
}

/// The contents of the code spans (`` `...` ``) of `text`.
pub fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The words of `text` that start with `prefix`, followed by at least one character `tail`
/// accepts and as many more as follow; a word glued to a letter, digit, `_` or `-` before
/// it (`non--flag`, `a_tether_x`) is not one.
pub fn names<'a>(text: &'a str, prefix: &str, tail: impl Fn(char) -> bool) -> BTreeSet<&'a str> {
    let glued = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    text.match_indices(prefix)
        .filter(|(at, _)| !text[..*at].chars().next_back().is_some_and(glued))
        .filter_map(|(at, _)| {
            let rest = &text[at + prefix.len()..];
            let len = rest.find(|c| !tail(c)).unwrap_or(rest.len());
            (len > 0).then(|| &text[at..at + prefix.len() + len])
        })
        .collect()
}

/// The long flags (`--name`) mentioned in `text`.
pub fn long_flags(text: &str) -> BTreeSet<&str> {
    names(text, "--", |c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
    })
    .into_iter()
    .filter(|flag| flag.as_bytes().get(2).is_some_and(u8::is_ascii_lowercase))
    .collect()
}
