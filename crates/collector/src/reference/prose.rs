//! Every flag, `TETHER_*` variable, `tether_*` metric and reason that the book (`docs/src`) or
//! the README names is on a generated reference page, or is another program's flag. The pages'
//! own tests hold them to the code, so nothing is documented that the code lacks.

use std::collections::BTreeSet;

use super::{files, names, page_path, root};

/// The flags of other programs the book shows, after their program. Each must still appear
/// somewhere, so that the list shrinks with the book.
const OTHER_PROGRAMS: &str = "\
    cargo: --all-targets --check --doc --example --examples --features --ignored --lib --test
        --workspace
    helm: --create-namespace --install --reuse-values --set --strict
    kubectl: --clusterrole --context --duration --from-file --raw --serviceaccount
    kube-apiserver: --authentication-config --http2-max-streams-per-connection
        --service-account-issuer --service-account-jwks-uri --service-account-key-file
        --service-account-max-token-expiration --service-account-signing-key-file
    aws eks get-token: --cluster-name
    karmada-controller-manager: --cluster-failure-threshold --controllers
        --health-probe-bind-address --metrics-bind-address
    scale-bench and shard-bench, through hack/bench.sh: --baseline-members --baseline-window
        --exec-misses --http1-collector --initial-list-rounds --lease-seconds --members
        --overhead-rounds --ready-limit --replicas --sharded
    rust-anchor: --system
    client-go-anchor: --mode
    any program: --help";

fn long_flags(text: &str) -> BTreeSet<&str> {
    let tail = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let flags = names(text, "--", tail).into_iter();
    flags
        .filter(|flag| flag.as_bytes().get(2).is_some_and(u8::is_ascii_lowercase))
        .collect()
}

fn variables(text: &str) -> BTreeSet<&str> {
    let tail = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
    names(text, "TETHER_", tail)
}

/// Metric names, a sample's suffix (`_bucket`, ...) left out.
fn metrics(text: &str) -> BTreeSet<&str> {
    let tail = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    let names = names(text, "tether_", tail);
    names.into_iter().map(family).collect()
}

fn family(name: &str) -> &str {
    let suffixes = ["_bucket", "_sum", "_count"].iter();
    suffixes.fold(name, |name, suffix| {
        name.strip_suffix(suffix).unwrap_or(name)
    })
}

/// The reasons named in prose: `` reason `Name` ``.
fn reasons(text: &str) -> BTreeSet<&str> {
    let named = text
        .match_indices("reason `")
        .filter_map(|(at, m)| text[at + m.len()..].split('`').next());
    named
        .filter(|name| name.starts_with(|c: char| c.is_ascii_uppercase()))
        .collect()
}

#[test]
fn everything_the_book_names_is_on_a_reference_page() {
    let page = |name| std::fs::read_to_string(page_path(name)).unwrap();
    let (cli, metrics_page, reasons_page) =
        (page("cli.md"), page("metrics.md"), page("reasons.md"));
    // The harness's variables may be named, though no page lists them.
    let harness = files(
        vec![root().join("crates/testkit/src"), root().join("e2e/src")],
        "rs",
    );
    let harness: String = harness.into_iter().map(|(_, text)| text).collect();
    let others = long_flags(OTHER_PROGRAMS);
    let known = [
        long_flags(&cli).union(&others).copied().collect(),
        variables(&cli)
            .union(&variables(&harness))
            .copied()
            .collect(),
        metrics(&metrics_page),
        // A reason is the first cell of a row of the table.
        (reasons_page.lines())
            .filter_map(|row| row.strip_prefix("| `")?.split('`').next())
            .collect::<BTreeSet<_>>(),
    ];
    let mut documents = files(vec![root().join("docs/src")], "md");
    let readme = root().join("README.md");
    documents.push((readme.clone(), std::fs::read_to_string(&readme).unwrap()));
    let (mut problems, mut used, mut seen) = (Vec::new(), BTreeSet::new(), [0; 4]);
    for (path, text) in &documents {
        let named = [
            long_flags(text),
            variables(text),
            metrics(text),
            reasons(text),
        ];
        used.extend(named[0].intersection(&others).copied());
        for (i, (named, known)) in named.iter().zip(&known).enumerate() {
            seen[i] += named.len();
            let path = path.strip_prefix(root()).unwrap_or(path).display();
            problems.extend(
                named
                    .difference(known)
                    .map(|name| format!("{path}: {name} is on no reference page")),
            );
        }
    }
    assert!(!seen.contains(&0), "nothing found to check: {seen:?}");
    assert!(
        problems.is_empty(),
        "the book names what the code does not have (another program's flag goes in \
         OTHER_PROGRAMS):\n{}",
        problems.join("\n")
    );
    let unused: Vec<_> = others.difference(&used).collect();
    assert!(
        unused.is_empty(),
        "OTHER_PROGRAMS lists flags the book no longer names: {unused:?}"
    );
}
