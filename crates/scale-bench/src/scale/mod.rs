//! The collector phases of the bench: N logical members on a few real member apiservers
//! ([`fleet`]), the collector as a child process ([`collector_process`]), and what the scale
//! and mass-rotation phases measure ([`run`]).
//!
//! NB: `e2e/tests/scale_smoke.rs` compiles this directory in by path to run the same code with
//! 20 members, so it may only use crates the `e2e` package also depends on (kube, k8s-openapi,
//! tokio, futures, anyhow, serde_json, secrecy, testkit, cluster-registry) and only `super::`
//! paths between its modules.

pub mod collector_process;
pub mod conditions;
pub mod fleet;
pub mod percentiles;
pub mod proc_stats;
pub mod prom;
pub mod run;
