//! Scale and speed of Tether, measured against anchors in the same run: 1,000 logical member
//! clusters in one collector on real kube-apiservers ([`scale`]), a mass rotation, other
//! systems' member clients beside Tether's on a subset of the same members, each a process of
//! its own ([`baselines`]: client-go as Karmada ≥ 1.19 and Argo CD wire it, built from
//! `anchors/client-go-anchor`; Karmada v1.18.2's own member config builder, built from
//! `anchors/karmada-anchor`; and kube-rs), the per-request cost of the `CredentialLayer`
//! ([`overhead`]), and the collector's connections to the member apiservers over HTTP/2 against
//! a second collector with HTTP/1.1 on the same fleet ([`scale::connections`]). `hack/bench.sh`
//! runs it all and prints one table ([`table`], [`sections`]); `tests/scale_smoke.rs` runs
//! [`scale`] with 20 members and asserts the correctness goals, no timing.
//!
//! # How a rotation is seen per member
//! "Switched" is the collector's `credentials rotated` log line ([`scale::collector_log`]);
//! "first request" and the check that the requests really carried the new tokens are
//! [`scale::run::rotate_all`]'s.

pub mod baselines;
pub mod credential_kinds;
pub mod overhead;
pub mod scale;
pub mod sections;
pub mod sharded;
pub mod table;
