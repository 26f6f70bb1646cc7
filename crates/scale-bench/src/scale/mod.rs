//! The collector phases of the bench: N logical members on a few real member apiservers
//! ([`fleet`], sized by [`FleetArgs`]), the collector as a child process with its log read
//! ([`collector_log`]), and what the scale and mass-rotation phases do ([`run`]) and measure
//! ([`report`]), with the collector's connections to the member apiservers ([`connections`]). The crate's `tests/scale_smoke.rs` runs the same code with 20 members.

pub mod collector_log;
pub mod conditions;
pub mod connections;
pub mod fleet;
pub mod initial_lists;
pub mod percentiles;
pub mod proc_stats;
pub mod report;
pub mod run;

/// How many members, on how many apiservers, made how fast: the arguments of every binary
/// that starts a fleet.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct FleetArgs {
    /// Logical member clusters, each its own ServiceAccount and Secret.
    #[arg(long, default_value_t = 1000)]
    pub members: usize,
    /// Member apiservers they share (`memberN` uses apiserver `N mod A`).
    #[arg(long, default_value_t = 3)]
    pub apiservers: usize,
    /// API calls in flight while creating and rotating members.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
}
