//! The flags of `collector check`: the collector's own, and the few of the check.

use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::cli::Args;

/// `collector check [--member NAME] [-o table|json] <the collector's flags>`.
#[derive(Clone, Debug, Parser)]
#[command(name = "check")]
pub struct CheckArgs {
    /// Check only this member. A name no source defines is reported as `NotDefined` (exit 1).
    #[arg(long, value_name = "NAME")]
    pub member: Option<String>,

    /// How to print the report: a table for people, or JSON for scripts.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table)]
    pub output: Output,

    /// Seconds to wait for every source of member definitions to be listed, and then the most
    /// each member's checks may take (they run concurrently).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub check_timeout: u64,

    /// How many members are checked at once. Each check opens a TLS connection, sends a few
    /// reviews and may run an exec plugin, so a registry of thousands of members is checked
    /// this many at a time, not all at once. `--check-timeout` bounds each member's checks
    /// once they start, not the wait for a turn.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub check_concurrency: u64,

    /// The collector's flags, read exactly as the collector reads them.
    #[command(flatten)]
    pub args: Args,
}

impl CheckArgs {
    /// `--check-timeout` as a duration.
    pub fn check_timeout(&self) -> Duration {
        Duration::from_secs(self.check_timeout)
    }

    /// `--check-concurrency` as a count.
    pub fn check_concurrency(&self) -> usize {
        usize::try_from(self.check_concurrency).unwrap_or(usize::MAX)
    }
}

/// The report's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// A table, one row per member, then each member's details and remedy.
    Table,
    /// One JSON object: `members` (one per member) and `sources`.
    Json,
}
