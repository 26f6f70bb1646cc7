//! End-to-end tests of Tether against real kube-apiservers; see `tests/`. This library holds
//! what several test files share: a Karmada control plane on the testkit harness, and the
//! collector run in-process.

pub mod collector_run;
pub mod karmada_plane;
pub mod scenario;
