//! Every flag and environment variable of `collector` and `collector check` is in the README's
//! "Configuration (`collector --help`)" table, with its default, its values and its variable;
//! and every flag and `TETHER_*` variable the README names exists.
//!
//! The flags are read from the clap command the binary parses, never from a list kept here.

#![allow(clippy::expect_used, reason = "a test fails by panicking")]

mod readme;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use clap::{ArgAction, CommandFactory as _};
use collector::command::Cli;

/// The README section that documents the flags.
const CONFIGURATION: &str = "Configuration (`collector --help`)";

/// The flags of other programs the README shows, by program. Each must still appear in the
/// README, so that the list shrinks with it.
const OTHER_PROGRAMS: &[(&str, &[&str])] = &[
    (
        "cargo",
        &[
            "--all-targets",
            "--check",
            "--features",
            "--ignored",
            "--lib",
            "--test",
            "--workspace",
        ],
    ),
    (
        "helm",
        &["--create-namespace", "--install", "--set", "--strict"],
    ),
    (
        "kubectl",
        &[
            "--clusterrole",
            "--context",
            "--duration",
            "--serviceaccount",
        ],
    ),
    (
        "kube-apiserver",
        &["--service-account-max-token-expiration"],
    ),
    ("aws eks get-token", &["--cluster-name"]),
    ("tether-credential", &["--skew", "--ttl"]),
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

/// The crates whose `TETHER_*` variables a user sets: the collector and what it links, and
/// the exec plugin. Variables of the test harness (`testkit`, `e2e`) may be documented, but
/// need not be.
const SHIPPED_CRATES: &[&str] = &[
    "collector",
    "cluster-registry",
    "member-client",
    "tether-credential",
];

/// One flag as clap parses it.
#[derive(Debug)]
struct Flag {
    /// `None` for the collector's own flags, `Some("check")` for those only `check` has.
    subcommand: Option<String>,
    long: String,
    aliases: Vec<String>,
    short: Option<char>,
    env: Option<String>,
    /// Empty for switches, whose default is "off".
    defaults: Vec<String>,
    /// The values a value-enum flag takes; empty for free-form values and plain booleans.
    values: Vec<String>,
    has_help: bool,
}

impl Flag {
    fn name(&self) -> String {
        match &self.subcommand {
            Some(sub) => format!("{sub} --{}", self.long),
            None => format!("--{}", self.long),
        }
    }
}

/// Every flag of `collector` and of its subcommands; a subcommand's copy of a collector flag
/// (`check` takes them all) is the collector's.
fn flags() -> Vec<Flag> {
    let root = Cli::command();
    let mut flags = Vec::new();
    for (subcommand, command) in
        std::iter::once((None, &root)).chain(root.get_subcommands().map(|sub| (Some(sub), sub)))
    {
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if ["help", "version"].contains(&long)
                || (subcommand.is_some()
                    && root.get_arguments().any(|a| a.get_id() == arg.get_id()))
            {
                continue;
            }
            let switch = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
            let mut values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .filter(|value| !value.is_hide_set())
                .map(|value| value.get_name().to_owned())
                .collect();
            if values == ["true", "false"] {
                values.clear();
            }
            flags.push(Flag {
                subcommand: subcommand.map(|sub| sub.get_name().to_owned()),
                long: long.to_owned(),
                aliases: arg
                    .get_all_aliases()
                    .unwrap_or_default()
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
                short: arg.get_short(),
                env: arg.get_env().map(|env| env.to_string_lossy().into_owned()),
                defaults: if switch {
                    Vec::new()
                } else {
                    arg.get_default_values()
                        .iter()
                        .map(|value| value.to_string_lossy().into_owned())
                        .collect()
                },
                values,
                has_help: arg
                    .get_help()
                    .is_some_and(|help| !help.to_string().trim().is_empty()),
            });
        }
    }
    assert!(flags.len() > 40, "the command lost its flags: {flags:?}");
    flags
}

/// The rows of the configuration table that document `flag`: its `--long` is in the first
/// cell, next to the subcommand's name for a subcommand's flag.
fn rows_of<'a>(table: &[Vec<&'a str>], flag: &Flag) -> Vec<Vec<&'a str>> {
    let long = format!("--{}", flag.long);
    table
        .iter()
        .filter(|row| {
            let first = row.first().copied().unwrap_or_default();
            let in_subcommand = first.split([' ', '`']).find(|w| !w.is_empty());
            readme::long_flags(first).contains(long.as_str())
                && match &flag.subcommand {
                    Some(sub) => in_subcommand == Some(sub.as_str()),
                    None => in_subcommand.is_some_and(|w| w.starts_with('-')),
                }
        })
        .cloned()
        .collect()
}

/// What is wrong with `flag`'s documentation in the configuration table.
fn flag_problems(table: &[Vec<&str>], flag: &Flag) -> Vec<String> {
    let name = flag.name();
    let mut problems = Vec::new();
    if !flag.has_help {
        problems.push(format!(
            "{name} has no --help text (a doc comment on its field)"
        ));
    }
    let rows = rows_of(table, flag);
    let [row] = rows.as_slice() else {
        problems.push(format!(
            "{name} has {} rows in the README's configuration table, not one",
            rows.len()
        ));
        return problems;
    };
    let whole = row.join(" | ");
    let spans = readme::code_spans(&whole);
    let first = row.first().copied().unwrap_or_default();
    for alias in &flag.aliases {
        if !readme::long_flags(first).contains(format!("--{alias}").as_str()) {
            problems.push(format!(
                "{name}: its alias `--{alias}` is not in its row's flag cell"
            ));
        }
    }
    if let Some(short) = flag.short
        && !readme::code_spans(first)
            .iter()
            .any(|span| span.split(' ').any(|w| w == format!("-{short}")))
    {
        problems.push(format!(
            "{name}: its short form `-{short}` is not in its row's flag cell"
        ));
    }
    if let Some(env) = &flag.env
        && !spans.iter().any(|span| span.trim_start_matches('$') == env)
    {
        problems.push(format!("{name}: its variable `{env}` is not in its row"));
    }
    let default_cell = readme::code_spans(row.get(1).copied().unwrap_or_default());
    for default in &flag.defaults {
        if !default_cell.contains(&default.as_str()) {
            problems.push(format!(
                "{name}: its default `{default}` is not in its row's default cell {:?}",
                row.get(1)
            ));
        }
    }
    for value in &flag.values {
        if !spans.contains(&value.as_str()) {
            problems.push(format!("{name}: its value `{value}` is not in its row"));
        }
    }
    problems
}

#[test]
fn every_flag_is_documented_with_its_default_values_and_variable() {
    let readme = readme::text();
    let table = readme::rows(readme::section(&readme, CONFIGURATION));
    let problems: Vec<String> = flags()
        .iter()
        .flat_map(|flag| flag_problems(&table, flag))
        .collect();
    assert!(
        problems.is_empty(),
        "the README's \"{CONFIGURATION}\" section does not match the command line:\n{}",
        problems.join("\n")
    );
}

/// Every long flag and alias of the command line, as `--name`.
fn command_line_flags() -> BTreeSet<String> {
    flags()
        .iter()
        .flat_map(|flag| std::iter::once(&flag.long).chain(&flag.aliases))
        .map(|long| format!("--{long}"))
        .collect()
}

#[test]
fn every_flag_the_configuration_section_names_exists() {
    let readme = readme::text();
    let section = readme::section(&readme, CONFIGURATION);
    let known = command_line_flags();
    let named = readme::long_flags(section);
    assert!(named.len() > 40, "no flags found in the section: {named:?}");
    let unknown: Vec<_> = named.iter().filter(|f| !known.contains(**f)).collect();
    assert!(
        unknown.is_empty(),
        "the README's \"{CONFIGURATION}\" section names flags the command line does not have: \
         {unknown:?}"
    );
}

#[test]
fn every_flag_the_readme_names_is_the_collectors_or_a_known_programs() {
    let readme = readme::text();
    let known = command_line_flags();
    let others: BTreeMap<&str, &str> = OTHER_PROGRAMS
        .iter()
        .flat_map(|(program, flags)| flags.iter().map(move |flag| (*flag, *program)))
        .collect();
    let named = readme::long_flags(&readme);
    let unknown: Vec<_> = named
        .iter()
        .filter(|f| !known.contains(**f) && !others.contains_key(**f))
        .collect();
    assert!(
        unknown.is_empty(),
        "the README names flags that neither `collector` nor `collector check` has: \
         {unknown:?}. If one is another program's, add it to OTHER_PROGRAMS"
    );
    let unused: Vec<_> = others
        .iter()
        .filter(|(f, _)| !named.contains(**f))
        .collect();
    assert!(
        unused.is_empty(),
        "OTHER_PROGRAMS lists flags the README no longer names: {unused:?}"
    );
}

/// The `"TETHER_..."` string literals of the Rust files under `dir`, by file, outside test
/// files (`tests.rs`, `tests/`).
fn tether_literals(dir: &Path, found: &mut BTreeMap<String, String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if path.is_dir() && name != "tests" {
            tether_literals(&path, found);
        } else if name.ends_with(".rs") && name != "tests.rs" {
            let text = std::fs::read_to_string(&path).expect("a source file");
            for literal in readme::names(&text, "\"TETHER_", |c| {
                c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'
            }) {
                found.insert(literal[1..].to_owned(), path.display().to_string());
            }
        }
    }
}

/// Every `TETHER_*` variable of the code, with where it is read: the flags' and the string
/// literals of every crate (a variable read with `std::env::var`), marking whether a user
/// sets it (a flag's, or read by a shipped crate).
fn tether_variables() -> BTreeMap<String, (String, bool)> {
    let mut variables = BTreeMap::new();
    for flag in flags() {
        if let Some(env) = flag.env.as_ref().filter(|env| env.starts_with("TETHER_")) {
            variables.insert(env.clone(), (flag.name(), true));
        }
    }
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<_> = std::fs::read_dir(&crates)
        .expect("the crates directory")
        .map(|entry| entry.expect("a directory entry").path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    dirs.push(crates.join("../e2e/src"));
    for src in dirs {
        let krate = src.parent().and_then(Path::file_name).unwrap_or_default();
        let shipped = SHIPPED_CRATES.contains(&&*krate.to_string_lossy());
        let mut literals = BTreeMap::new();
        tether_literals(&src, &mut literals);
        for (variable, file) in literals {
            let entry = variables.entry(variable).or_insert((file, false));
            entry.1 |= shipped;
        }
    }
    variables
}

#[test]
fn every_tether_variable_is_documented_and_every_documented_one_exists() {
    let readme = readme::text();
    let variables = tether_variables();
    assert!(
        variables.len() >= 8 && variables.contains_key("TETHER_MEMBERS_FROM"),
        "the flags' variables were not found: {variables:?}"
    );
    let documented = readme::names(&readme, "TETHER_", |c| {
        c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'
    });
    let undocumented: Vec<_> = variables
        .iter()
        .filter(|(variable, (_, user_set))| *user_set && !documented.contains(variable.as_str()))
        .map(|(variable, (read_by, _))| format!("{variable} (read by {read_by})"))
        .collect();
    assert!(
        undocumented.is_empty(),
        "the README does not name these variables: {undocumented:?}"
    );
    let unknown: Vec<_> = documented
        .iter()
        .filter(|variable| !variables.contains_key(**variable))
        .collect();
    assert!(
        unknown.is_empty(),
        "the README names variables no code reads: {unknown:?}"
    );
}
