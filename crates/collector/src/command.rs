//! The `collector` command line: the collector's own flags ([`Args`]), or a subcommand.

use clap::{Parser, Subcommand};

use crate::{check::CheckArgs, cli::Args};

/// Watches every member cluster with credentials that survive rotation, and reports their
/// health to the control plane.
///
/// Without a subcommand it runs the collector; `collector check` checks every
/// member once and exits.
#[derive(Clone, Debug, Parser)]
#[command(name = "collector", version, subcommand_negates_reqs = true)]
pub struct Cli {
    /// What to run instead of the collector.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The collector's flags.
    #[command(flatten)]
    pub args: Args,
}

/// A subcommand of `collector`.
#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Check every member once, as the collector would use it, and print what is wrong and
    /// how to fix it. Exits 0 only when every member checked is fully usable, 1 when one is
    /// not, 2 on usage or start-up errors.
    Check(CheckArgs),
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn flags_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_collector_still_runs_without_a_subcommand() {
        let cli = Cli::try_parse_from(["collector", "--probe-period", "3"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.args.probe_period, 3);
    }

    #[test]
    fn check_takes_the_collectors_flags() {
        let cli = Cli::try_parse_from([
            "collector",
            "check",
            "--members-from",
            "directory",
            "--members-dir",
            "/m",
            "--member",
            "m1",
            "-o",
            "json",
        ])
        .unwrap();
        let Some(Command::Check(check)) = cli.command else {
            panic!("not check: {cli:?}");
        };
        assert_eq!(check.member.as_deref(), Some("m1"));
        assert_eq!(
            check.args.sources.members_dir.as_deref(),
            Some("/m".as_ref())
        );
        assert!(
            Cli::command().render_help().to_string().contains("check"),
            "--help lists check"
        );
    }
}
