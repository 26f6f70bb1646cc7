//! The collector phases of the bench: N logical members on a few real member apiservers
//! ([`fleet`]), the collector as a child process with its log read ([`collector_log`]), and
//! what the scale and mass-rotation phases do ([`run`]) and measure ([`report`]). The crate's
//! `tests/scale_smoke.rs` runs the same code with 20 members.

pub mod collector_log;
pub mod conditions;
pub mod fleet;
pub mod fleet_args;
pub mod percentiles;
pub mod proc_stats;
pub mod report;
pub mod run;
