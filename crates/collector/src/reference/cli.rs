//! `docs/src/reference/cli.md`: every flag of `collector`, `collector check` and
//! `tether-credential`, read from the clap commands they parse, and every environment variable
//! the shipped crates read.

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command, CommandFactory as _};

use super::{assert_page_current, escape, files, names, root};
use crate::{command::Cli, minting::FORMER_VARIABLES};

/// The rows of the variables read outside clap, [`FORMER_VARIABLES`] aside. Each must still be
/// named in a shipped crate's source.
const OTHER_VARIABLES: &str = "\
| `NO_COLOR` | `collector` | set and not empty: no colour codes in the text log with `--color auto` |
| `RUST_LOG` | `collector` | log levels and targets (`tracing`'s `EnvFilter`); default `info` |
| `KUBERNETES_SERVICE_HOST` | `collector` | with `KUBERNETES_SERVICE_PORT` (default `443`), the control plane when neither `--kubeconfig` nor `--control-plane-url` is given |
| `KUBERNETES_SERVICE_PORT` | `collector` | see `KUBERNETES_SERVICE_HOST` |
| `KUBERNETES_EXEC_INFO` | `tether-credential` | the `ExecCredential` client-go hands an exec plugin: the collector sets it for the plugins it runs, `tether-credential` reads the member and its Secret from it |";

/// The crates whose variables a user sets: the collector, what it links, and the exec plugin.
const SHIPPED_CRATES: [&str; 4] = [
    "collector",
    "cluster-registry",
    "member-client",
    "tether-credential",
];

/// `arg`'s section: how it is written, its default, variable and former names, its help (there
/// must be one) and its values.
fn render_arg(page: &mut String, arg: &Arg) {
    let long = arg.get_long().unwrap_or_default();
    let short = arg
        .get_short()
        .map(|s| format!("-{s}, "))
        .unwrap_or_default();
    let switch = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
    let names = arg
        .get_value_names()
        .filter(|_| !switch)
        .unwrap_or_default();
    let takes: String = names.iter().map(|name| format!(" <{name}>")).collect();
    let mut facts = vec![format!("usage: `{short}--{long}{takes}`")];
    let defaults: Vec<_> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy())
        .collect();
    if !defaults.is_empty() {
        facts.push(format!("default: `{}`", defaults.join("`, `")));
    }
    facts.extend(
        arg.get_env()
            .map(|env| format!("environment: `{}`", env.to_string_lossy())),
    );
    if matches!(arg.get_action(), ArgAction::Append) {
        let delimited = arg.get_value_delimiter() == Some(',');
        facts.push(format!(
            "repeatable{}",
            if delimited { " or comma-separated" } else { "" }
        ));
    }
    if let Some(aliases) = arg.get_all_aliases().filter(|aliases| !aliases.is_empty()) {
        facts.push(format!(
            "formerly `--{}`, still accepted for one release",
            aliases.join("`, `--")
        ));
    }
    let help = (arg.get_long_help().or(arg.get_help())).map_or_else(String::new, |h| h.to_string());
    assert!(
        !help.trim().is_empty(),
        "--{long} has no help: give its field a doc comment"
    );
    let _ = writeln!(
        page,
        "### `--{long}`\n\n- {}\n\n{}\n",
        facts.join("\n- "),
        escape(help.trim())
    );
    let values = arg.get_possible_values().into_iter();
    let values: Vec<_> = values
        .filter(|v| !v.is_hide_set() && !["true", "false"].contains(&v.get_name()))
        .collect();
    for value in &values {
        let help = value
            .get_help()
            .map(|help| format!(": {}", escape(&help.to_string())));
        let _ = writeln!(page, "- `{}`{}", value.get_name(), help.unwrap_or_default());
    }
    page.push_str(if values.is_empty() { "" } else { "\n" });
}

/// One program's (or subcommand's) section; a subcommand's copies of its parent's flags left
/// out.
fn render_command(page: &mut String, title: &str, command: &Command, parent: Option<&Command>) {
    let about = (command.get_long_about().or(command.get_about())).map(ToString::to_string);
    let about = about.unwrap_or_default();
    let _ = writeln!(page, "## `{title}`\n\n{}\n", escape(about.trim()));
    if let Some(after) = command.get_after_long_help() {
        let _ = writeln!(page, "```text\n{}\n```\n", after.to_string().trim_end());
    }
    let inherited =
        |arg: &Arg| parent.is_some_and(|p| p.get_arguments().any(|a| a.get_id() == arg.get_id()));
    let own = |long: &str| !["help", "version"].contains(&long);
    for arg in command.get_arguments().filter(|arg| !inherited(arg)) {
        if arg.get_long().is_some_and(own) {
            render_arg(page, arg);
        }
    }
}

/// The whole page.
fn render() -> String {
    let mut page = String::from(
        "# CLI and environment\n\n\
         Every flag of `collector`, `collector check` and `tether-credential`, as their \
         `--help` gives it, and every environment variable they read.\n\n",
    );
    let programs = [
        ("collector", Cli::command()),
        ("tether-credential", tether_credential::command()),
    ];
    let mut variables: Vec<String> = OTHER_VARIABLES.lines().map(str::to_owned).collect();
    for (program, command) in &programs {
        render_command(&mut page, program, command, None);
        for sub in command.get_subcommands() {
            render_command(
                &mut page,
                &format!("{program} {}", sub.get_name()),
                sub,
                Some(command),
            );
        }
        let args = std::iter::once(command)
            .chain(command.get_subcommands())
            .flat_map(Command::get_arguments);
        for arg in args {
            if let (Some(env), Some(long)) = (arg.get_env(), arg.get_long()) {
                variables.push(format!(
                    "| `{}` | `{program}` | `--{long}` |",
                    env.to_string_lossy()
                ));
            }
        }
    }
    for (former, new) in FORMER_VARIABLES {
        variables.push(format!(
            "| `{former}` | `collector` | the former name of `{new}`, still read for one release \
             where neither it nor its flag is set |"
        ));
    }
    variables.sort_by_key(|row| row.split('`').nth(1).map(str::to_owned));
    variables.dedup();
    let _ = writeln!(
        page,
        "## Environment variables\n\n\
         A flag's variable sets the flag when it is not given; the flag wins when both are. A \
         switch's variable takes `true` or `false`, a repeatable flag's a comma-separated \
         list.\n\n| variable | read by | what it sets |\n| --- | --- | --- |\n{}",
        variables.join("\n")
    );
    page.push_str(
        "\n## Renamed annotations\n\n\
         A definition's minting annotations were named for rotation; the former spelling is read, \
         for one release, where the new one is absent.\n\n| annotation | formerly |\n| --- | --- |\n",
    );
    for (now, former) in cluster_registry::minting::FORMER_ANNOTATIONS {
        let _ = writeln!(page, "| `{now}` | `{former}` |");
    }
    page
}

#[test]
fn the_cli_page_is_current() {
    let source = "the clap commands of `collector` and `tether-credential` by \
                  crates/collector/src/reference/cli.rs";
    assert_page_current("cli.md", source, "reference", &render());
}

/// A variable read by a literal (`std::env::var`), not through a flag, must be a former one or
/// in [`OTHER_VARIABLES`], or the page lacks it; and each of those must still be read. Test
/// files (`tests.rs`, `tests/`) may set variables of their own.
#[test]
fn every_variable_read_outside_clap_is_on_the_page_and_read() {
    let dirs = SHIPPED_CRATES.map(|name| root().join("crates").join(name).join("src"));
    let sources = files(dirs.to_vec(), "rs");
    let page = render();
    let tail = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
    for (path, text) in &sources {
        if path.ends_with("tests.rs") || path.components().any(|c| c.as_os_str() == "tests") {
            continue;
        }
        for literal in names(text, "\"TETHER_", tail) {
            let variable = &literal[1..];
            assert!(
                page.contains(&format!("`{variable}`")),
                "{variable} is not on cli.md: add it to OTHER_VARIABLES"
            );
        }
    }
    let name_char = |c: char| c.is_ascii_uppercase() || c == '_';
    for variable in names(OTHER_VARIABLES, "| `", name_char) {
        let variable = &variable[3..];
        assert!(
            sources.iter().any(|(_, text)| text.contains(variable)),
            "{variable} is no longer read: drop it from OTHER_VARIABLES"
        );
    }
}
