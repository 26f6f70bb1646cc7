//! The collector phases of the bench: N logical members on a few real member apiservers
//! ([`fleet`]), the collector as a child process ([`collector_process`]), and what the scale
//! and mass-rotation phases measure ([`run`]). The crate's `tests/scale_smoke.rs` runs the same code with 20 members.

pub mod collector_process;
pub mod conditions;
pub mod fleet;
pub mod percentiles;
pub mod proc_stats;
pub mod prom;
pub mod run;
