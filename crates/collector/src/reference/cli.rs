//! `docs/src/reference/cli.md`: every flag of `collector`, `collector check` and
//! `tether-credential`, read from the clap commands they parse, and every environment variable
//! the shipped crates read.

use std::{collections::BTreeSet, fmt::Write as _, path::Path};

use clap::{Arg, ArgAction, Command, CommandFactory as _};

use super::{assert_page_current, escape, names};
use crate::{command::Cli, minting::FORMER_VARIABLES};

/// Variables read outside clap, other than [`FORMER_VARIABLES`]: by name, who reads it, and
/// what it does. Each must still be named in a shipped crate's source.
const OTHER_VARIABLES: &[(&str, &str, &str)] = &[
    (
        "NO_COLOR",
        "collector",
        "set and not empty: the text log carries no colour codes with `--color auto`",
    ),
    (
        "RUST_LOG",
        "collector",
        "log levels and targets (`tracing` `EnvFilter` syntax); default `info`",
    ),
    (
        "KUBERNETES_SERVICE_HOST",
        "collector",
        "with `KUBERNETES_SERVICE_PORT` (default `443`), the control plane when \
         `--control-plane-url` is not given and there is no `--kubeconfig`",
    ),
    (
        "KUBERNETES_SERVICE_PORT",
        "collector",
        "see `KUBERNETES_SERVICE_HOST`",
    ),
    (
        "KUBERNETES_EXEC_INFO",
        "tether-credential",
        "the `ExecCredential` client-go hands an exec plugin; the collector sets it for the \
         plugins it runs, and `tether-credential` reads the member and Secret from it",
    ),
];

/// The crates whose variables a user sets: the collector, what it links, and the exec plugin.
const SHIPPED_CRATES: &[&str] = &[
    "collector",
    "cluster-registry",
    "member-client",
    "tether-credential",
];

/// The arguments of `command` the page documents: named ones, without `--help`/`--version`,
/// and for a subcommand only those the collector itself does not take.
fn documented_args<'a>(command: &'a Command, parent: Option<&'a Command>) -> Vec<&'a Arg> {
    command
        .get_arguments()
        .filter(|arg| {
            arg.get_long()
                .is_some_and(|long| !["help", "version"].contains(&long))
        })
        .filter(|arg| parent.is_none_or(|p| p.get_arguments().all(|a| a.get_id() != arg.get_id())))
        .collect()
}

fn is_switch(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse)
}

fn code_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.into_iter().map(|item| format!("`{item}`")).collect();
    items.join(", ")
}

fn render_arg(page: &mut String, arg: &Arg) {
    let long = arg.get_long().unwrap_or_default();
    let mut usage = match arg.get_short() {
        Some(short) => format!("-{short}, --{long}"),
        None => format!("--{long}"),
    };
    if !is_switch(arg) {
        for name in arg.get_value_names().unwrap_or_default() {
            let _ = write!(usage, " <{name}>");
        }
    }
    let _ = writeln!(page, "### `--{long}`\n\n- usage: `{usage}`");
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|value| value.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() {
        let _ = writeln!(
            page,
            "- default: {}",
            code_list(defaults.iter().map(String::as_str))
        );
    }
    if let Some(env) = arg.get_env() {
        let _ = writeln!(page, "- environment: `{}`", env.to_string_lossy());
    }
    if matches!(arg.get_action(), ArgAction::Append) {
        let delimited = arg.get_value_delimiter() == Some(',');
        let how = if delimited {
            "repeatable or comma-separated"
        } else {
            "repeatable"
        };
        let _ = writeln!(page, "- {how}");
    }
    let aliases = arg.get_all_aliases().unwrap_or_default();
    if !aliases.is_empty() {
        let former: Vec<String> = aliases.iter().map(|alias| format!("--{alias}")).collect();
        let _ = writeln!(
            page,
            "- formerly {}, still accepted for one release",
            code_list(former.iter().map(String::as_str))
        );
    }
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(ToString::to_string);
    let _ = writeln!(page, "\n{}\n", escape(help.unwrap_or_default().trim()));
    let values: Vec<_> = arg
        .get_possible_values()
        .into_iter()
        .filter(|value| !value.is_hide_set())
        .collect();
    if !values.is_empty()
        && values
            .iter()
            .map(|value| value.get_name())
            .ne(["true", "false"])
    {
        for value in values {
            let help = value
                .get_help()
                .map(|help| format!(": {}", escape(&help.to_string())));
            let _ = writeln!(page, "- `{}`{}", value.get_name(), help.unwrap_or_default());
        }
        page.push('\n');
    }
}

/// One program's (or subcommand's) section.
fn render_command(page: &mut String, title: &str, command: &Command, parent: Option<&Command>) {
    let about = command.get_long_about().or(command.get_about());
    let about = about.map(ToString::to_string).unwrap_or_default();
    let _ = writeln!(page, "## `{title}`\n\n{}\n", escape(about.trim()));
    if let Some(after) = command.get_after_long_help() {
        let _ = writeln!(page, "```text\n{}\n```\n", after.to_string().trim_end());
    }
    for arg in documented_args(command, parent) {
        render_arg(page, arg);
    }
}

/// The environment table: the flags' variables, the former ones and [`OTHER_VARIABLES`].
fn render_variables(page: &mut String, programs: &[(&str, Command)]) {
    page.push_str(
        "## Environment variables\n\n\
         A flag's variable sets the flag when it is not given; the flag wins when both are. A \
         switch's variable takes `true` or `false`, a repeatable flag's a comma-separated \
         list.\n\n| variable | read by | what it sets |\n| --- | --- | --- |\n",
    );
    let mut rows = Vec::new();
    for (program, command) in programs {
        let commands = std::iter::once(command).chain(command.get_subcommands());
        for arg in commands.flat_map(|command| command.get_arguments()) {
            if let (Some(env), Some(long)) = (arg.get_env(), arg.get_long()) {
                let env = env.to_string_lossy().into_owned();
                rows.push((env, *program, format!("`--{long}`")));
            }
        }
    }
    for (former, new) in FORMER_VARIABLES {
        let what = format!(
            "the former name of `{new}`, still read for one release where neither it nor its \
             flag is set"
        );
        rows.push((former.to_owned(), "collector", what));
    }
    for (variable, program, what) in OTHER_VARIABLES {
        rows.push(((*variable).to_owned(), *program, escape(what)));
    }
    rows.sort();
    rows.dedup();
    for (variable, program, what) in rows {
        let _ = writeln!(page, "| `{variable}` | `{program}` | {what} |");
    }
}

fn programs() -> [(&'static str, Command); 2] {
    [
        ("collector", Cli::command()),
        ("tether-credential", tether_credential::command()),
    ]
}

/// The whole page.
fn render() -> String {
    let mut page = String::from(
        "# CLI and environment\n\n\
         Every flag of `collector`, `collector check` and `tether-credential`, as their \
         `--help` gives it, and every environment variable they read.\n\n",
    );
    let [(_, collector), (_, credential)] = programs();
    render_command(&mut page, "collector", &collector, None);
    for sub in collector.get_subcommands() {
        render_command(
            &mut page,
            &format!("collector {}", sub.get_name()),
            sub,
            Some(&collector),
        );
    }
    render_command(&mut page, "tether-credential", &credential, None);
    render_variables(&mut page, &programs());
    page
}

#[test]
fn the_cli_page_is_current() {
    assert_page_current(
        "cli.md",
        "the clap commands of `collector` and `tether-credential` by \
         crates/collector/src/reference/cli.rs",
        "reference",
        &render(),
    );
}

#[test]
fn every_flag_has_help() {
    for (program, command) in programs() {
        let subcommands: Vec<_> = command.get_subcommands().collect();
        for arg in documented_args(&command, None).into_iter().chain(
            subcommands
                .iter()
                .flat_map(|sub| documented_args(sub, Some(&command))),
        ) {
            let help = arg
                .get_help()
                .map(|help| help.to_string())
                .unwrap_or_default();
            assert!(
                !help.trim().is_empty(),
                "{program} {:?} has no help",
                arg.get_long()
            );
        }
    }
}

/// The Rust sources of the shipped crates, by path.
fn shipped_sources() -> Vec<(std::path::PathBuf, String)> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<_> = SHIPPED_CRATES
        .iter()
        .map(|name| crates.join(name).join("src"))
        .collect();
    let mut sources = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                sources.push((path, text));
            }
        }
    }
    sources
}

/// A variable read by a literal (`std::env::var`) rather than through a flag must
/// be a former variable or in [`OTHER_VARIABLES`], or the page would not have it. Test files
/// (`tests.rs`, `tests/`) may set variables of their own.
#[test]
fn every_tether_variable_the_shipped_crates_read_is_on_the_page() {
    let page = render();
    let mut missing = BTreeSet::new();
    let tail = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
    for (path, text) in shipped_sources() {
        let test =
            path.ends_with("tests.rs") || path.components().any(|c| c.as_os_str() == "tests");
        for literal in names(&text, "\"TETHER_", tail)
            .into_iter()
            .filter(|_| !test)
        {
            if !page.contains(&format!("`{}`", &literal[1..])) {
                missing.insert(literal[1..].to_owned());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "read but not on cli.md (add to OTHER_VARIABLES): {missing:?}"
    );
}

#[test]
fn every_other_variable_is_still_named_in_a_shipped_crate() {
    let sources = shipped_sources();
    for (variable, _, _) in OTHER_VARIABLES {
        assert!(
            sources.iter().any(|(_, text)| text.contains(variable)),
            "{variable} is no longer read: drop it from OTHER_VARIABLES"
        );
    }
}
