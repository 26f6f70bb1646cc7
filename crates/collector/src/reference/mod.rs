//! The book's reference pages, generated from the code: `docs/src/reference/cli.md` (here, from
//! the clap commands), `metrics.md` (`metrics::documented`, from the encoded registry) and
//! `reasons.md` (`reason::tests`, from the table of reasons).
//!
//! Each page's test renders it and fails while the committed page differs, so whatever the code
//! has (a flag, a variable, a metric family, a reason) is documented by construction.
//! [`prose`] holds the rest of the book and the README to the pages: what they name must be on
//! one, so nothing is documented that the code lacks.

mod cli;
mod prose;

use std::path::PathBuf;

/// `docs/src/reference/{page}`.
pub(crate) fn page_path(page: &str) -> PathBuf {
    root().join("docs/src/reference").join(page)
}

/// Asserts that `docs/src/reference/{page}` is `body` under the generated-page header; with
/// `BLESS` set, writes it instead. `source` names what it is generated from, `filter` the
/// `cargo test -p collector --lib` filter that runs its test.
pub(crate) fn assert_page_current(page: &str, source: &str, filter: &str, body: &str) {
    let bless = format!("BLESS=1 cargo test -p collector --lib {filter}");
    let want =
        format!("<!-- Generated from {source}; do not edit. Regenerate: {bless} -->\n\n{body}");
    let path = page_path(page);
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    let first_difference = have.lines().zip(want.lines()).position(|(a, b)| a != b);
    assert!(
        have == want,
        "docs/src/reference/{page} is stale: run {bless}\n(first difference at line {}: {:?})",
        first_difference.map_or(have.lines().count().min(want.lines().count()), |i| i) + 1,
        first_difference.and_then(|i| have.lines().nth(i)),
    );
}

/// The files under `dirs` whose names end in `ext`, with their text, by path.
pub(crate) fn files(mut dirs: Vec<PathBuf>, ext: &str) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    while let Some(dir) = dirs.pop() {
        for path in std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
        {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|found| found == ext) {
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((path, text));
            }
        }
    }
    files
}

/// The repository's root.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The words of `text` that start with `prefix`, followed by at least one character `tail`
/// accepts and as many more as follow; a word glued to a letter, digit, `_` or `-` before
/// it (`non--flag`, `a_tether_x`) is not one.
pub(crate) fn names<'a>(
    text: &'a str,
    prefix: &str,
    tail: impl Fn(char) -> bool,
) -> std::collections::BTreeSet<&'a str> {
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

/// `text` with `<` and `|` escaped outside code spans, so that it stays one Markdown table
/// cell and `<member>` is not taken for HTML.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' => in_code = !in_code,
            '<' if !in_code => {
                out.push_str("&lt;");
                continue;
            }
            '|' => {
                out.push_str("\\|");
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}
