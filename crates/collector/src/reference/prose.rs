//! Every flag, `TETHER_*` variable, `tether_*` metric and reason that the book (`docs/src`) or
//! the README names is on a generated reference page, or is another program's flag. The pages'
//! own tests hold them to the code, so nothing is documented that the code lacks.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use super::{names, page_path};

/// The flags of other programs the book shows, by program. Each must still appear somewhere,
/// so that the list shrinks with the book.
const OTHER_PROGRAMS: &[(&str, &[&str])] = &[
    (
        "cargo",
        &[
            "--all-targets",
            "--check",
            "--doc",
            "--features",
            "--ignored",
            "--lib",
            "--test",
            "--workspace",
        ],
    ),
    (
        "helm",
        &[
            "--create-namespace",
            "--install",
            "--reuse-values",
            "--set",
            "--strict",
        ],
    ),
    (
        "kubectl",
        &[
            "--clusterrole",
            "--context",
            "--duration",
            "--from-file",
            "--serviceaccount",
        ],
    ),
    (
        "kube-apiserver",
        &["--service-account-max-token-expiration"],
    ),
    ("aws eks get-token", &["--cluster-name"]),
    (
        "scale-bench and shard-bench, through hack/bench.sh",
        &[
            "--baseline-window",
            "--exec-misses",
            "--lease-seconds",
            "--members",
            "--overhead-rounds",
            "--replicas",
            "--sharded",
        ],
    ),
    ("rust-anchor", &["--system"]),
    ("client-go-anchor", &["--mode"]),
    ("any program", &["--help"]),
];

/// The harness's variables, which the book may name though no page lists them.
const HARNESS: &[&str] = &["../testkit/src", "../../e2e/src"];

/// The README and every page of the book, by path.
fn documents() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut documents = BTreeMap::new();
    let mut dirs = vec![root.join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                let text = std::fs::read_to_string(&path).unwrap();
                let name = path.strip_prefix(&root).unwrap_or(&path);
                documents.insert(name.display().to_string(), text);
            }
        }
    }
    let readme = root.join("README.md");
    documents.insert(
        "README.md".to_owned(),
        std::fs::read_to_string(readme).unwrap(),
    );
    documents
}

fn page(name: &str) -> String {
    std::fs::read_to_string(page_path(name)).unwrap()
}

fn long_flags(text: &str) -> BTreeSet<&str> {
    let tail = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let flags = names(text, "--", tail).into_iter();
    flags
        .filter(|flag| flag.as_bytes().get(2).is_some_and(u8::is_ascii_lowercase))
        .collect()
}

fn variables(text: &str) -> BTreeSet<&str> {
    names(text, "TETHER_", |c| {
        c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'
    })
}

/// A metric's name, a sample's suffix (`_bucket`, ...) left out.
fn metrics(text: &str) -> BTreeSet<&str> {
    let tail = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    let names = names(text, "tether_", tail).into_iter();
    names
        .map(|name| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .fold(name, |n, s| n.strip_suffix(s).unwrap_or(n))
        })
        .collect()
}

/// The reasons named in prose: `` reason `Name` ``.
fn reasons(text: &str) -> BTreeSet<&str> {
    text.match_indices("reason `")
        .filter_map(|(at, marker)| text[at + marker.len()..].split('`').next())
        .filter(|name| name.starts_with(|c: char| c.is_ascii_uppercase()))
        .collect()
}

#[test]
fn everything_the_book_names_is_on_a_reference_page() {
    let (cli, metrics_page, reasons_page) =
        (page("cli.md"), page("metrics.md"), page("reasons.md"));
    let mut harness = String::new();
    for dir in HARNESS {
        for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)).unwrap() {
            let path = entry.unwrap().path();
            harness.push_str(&std::fs::read_to_string(path).unwrap_or_default());
        }
    }
    let others: BTreeSet<&str> = OTHER_PROGRAMS
        .iter()
        .flat_map(|(_, flags)| flags.iter().copied())
        .collect();
    let known_flags: BTreeSet<&str> = long_flags(&cli).union(&others).copied().collect();
    let known_variables: BTreeSet<&str> = variables(&cli)
        .union(&variables(&harness))
        .copied()
        .collect();
    let known_metrics = metrics(&metrics_page);
    let known_reasons: BTreeSet<&str> = reasons_page.split('`').skip(1).step_by(2).collect();

    let (mut problems, mut used_others, mut seen) = (Vec::new(), BTreeSet::new(), [0; 4]);
    for (path, text) in documents() {
        let mut check = |kind: &str, named: BTreeSet<&str>, known: &BTreeSet<&str>, at: usize| {
            seen[at] += named.len();
            for name in named.into_iter().filter(|name| !known.contains(name)) {
                problems.push(format!("{path}: {kind} {name} is on no reference page"));
            }
        };
        let flags = long_flags(&text);
        used_others.extend(
            flags
                .iter()
                .filter(|flag| others.contains(*flag))
                .map(|f| f.to_string()),
        );
        check("flag", flags, &known_flags, 0);
        check("variable", variables(&text), &known_variables, 1);
        check("metric", metrics(&text), &known_metrics, 2);
        check("reason", reasons(&text), &known_reasons, 3);
    }
    assert!(
        seen.iter().all(|n| *n > 0),
        "nothing found to check: {seen:?}"
    );
    assert!(
        problems.is_empty(),
        "the book names what the code does not have (a flag of another program goes in \
         OTHER_PROGRAMS):\n{}",
        problems.join("\n")
    );
    let unused: Vec<_> = others
        .iter()
        .filter(|flag| !used_others.contains(**flag))
        .collect();
    assert!(
        unused.is_empty(),
        "OTHER_PROGRAMS lists flags the book no longer names: {unused:?}"
    );
}
