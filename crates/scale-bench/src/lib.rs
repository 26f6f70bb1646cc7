//! Scale and speed of Tether, measured against anchors in the same run: 1,000 logical member
//! clusters in one collector on real kube-apiservers ([`scale`]), a mass rotation, other
//! systems' member clients beside Tether's on a subset of the same members, each a process of
//! its own ([`baselines`]: client-go as Karmada and Argo CD wire it, built from
//! `anchors/client-go-anchor`, and kube-rs), and the per-request cost of the `CredentialLayer`
//! ([`overhead`]). `hack/bench.sh` runs it all and prints
//! one table ([`table`], [`sections`]); `tests/scale_smoke.rs` runs [`scale`] with 20 members and asserts
//! the correctness goals, no timing.
//!
//! # How a rotation is seen per member
//! The collector's supervisor logs `credentials rotated` (JSON, with `member`) when it receives
//! the registry's `CredentialsRotated`, which is sent only after the member's token-cache entry
//! was invalidated; from then on the member's next request misses the cache and fetches the new
//! token from the in-memory Secret store. The bench reads the collector's stdout and takes the
//! log line's timestamp (same machine, same wall clock) minus the Secret write's
//! acknowledgement: "switched". When that next request goes out is read from the token-cache
//! fetch counter (one fetch per rotated member, polled every 100 ms): "first request".
//! That the requests really carried the new tokens is then checked the hard way: the old
//! ServiceAccounts are deleted, TokenReview confirms every old token is rejected, one more probe
//! period passes, and the members must have answered no 401 and no Cluster may have shown
//! `CredentialsValid=False` (a watch on the Clusters catches even a transient one).

pub mod baselines;
pub mod credential_kinds;
pub mod overhead;
pub mod scale;
pub mod sections;
pub mod sharded;
pub mod table;
