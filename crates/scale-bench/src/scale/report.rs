//! What the two collector phases measured ([`super::run`]).

use std::{collections::BTreeSet, time::Duration};

use super::{
    connections::{ConnectionCount, ConnectionReport},
    percentiles::Percentiles,
};

/// What the scale phase measured.
#[derive(Clone, Debug)]
pub struct ScaleReport {
    /// Logical members.
    pub members: usize,
    /// Member apiservers they share.
    pub apiservers: usize,
    /// Creating every ServiceAccount, token, Secret and Cluster.
    pub setup: Duration,
    /// Collector start → every member `Ready=True` on the control plane; `None` if not within
    /// the limit.
    pub all_ready: Option<Duration>,
    /// Members Ready when the bench stopped waiting.
    pub ready_count: usize,
    /// Collector start → each member's first `Ready=True`.
    pub ready: Percentiles,
    /// Collector RSS at the end of the steady-state window.
    pub rss_bytes: u64,
    /// Collector peak RSS so far (`VmHWM`).
    pub peak_rss_bytes: u64,
    /// Collector CPU during the window, in cores.
    pub cpu_cores: f64,
    /// The window's length.
    pub window: Duration,
    /// The wait between all Ready and the window.
    pub settle: Duration,
    /// Watches open on the member apiservers at the end of the window, minus those open before
    /// the collector started (the apiservers' own).
    pub watches: f64,
    /// What the collector should hold: members × (Nodes + mirrored kinds).
    pub watches_expected: usize,
    /// Requests per second the member apiservers served during the window (the bench's own
    /// metric scrapes subtracted).
    pub requests_per_second: f64,
    /// Token-cache fetches per second during the window (reads of the in-memory Secret store).
    pub fetches_per_second: f64,
    /// The window's requests per second by `verb resource[/subresource]`, largest first.
    pub requests_by_kind: Vec<(String, f64)>,
    /// The collector's connections to the member apiservers from all Ready to the end of the
    /// window, and its RSS (as above).
    pub connections: ConnectionReport,
}

/// What the mass rotation measured.
#[derive(Clone, Debug)]
pub struct RotationReport {
    /// Rotated members.
    pub members: usize,
    /// First Secret write sent → last acknowledged.
    pub writes: Duration,
    /// Per member: its Secret write acknowledged → the collector switched its cache entry
    /// (logged `credentials rotated`); 0 when the switch was logged before the ack arrived.
    pub switched: Percentiles,
    /// Rotation start → the k-th member's first request with its new token (the k-th fetch of
    /// the token cache after the start; each rotated member fetches once, on its next request).
    pub in_use: Percentiles,
    /// Token-cache fetches during the rotation.
    pub fetches: f64,
    /// Relists during the rotation.
    pub relists: f64,
    /// 401s the members answered during the rotation (before any refresh).
    pub unauthorized: f64,
    /// Rotation start → every old token rejected by its apiserver.
    pub revoked_after: Duration,
    /// Members seen with `CredentialsValid=False` during the rotation.
    pub credentials_false: BTreeSet<String>,
    /// Members whose switch the collector did not log.
    pub not_switched: usize,
    /// The collector's connections to the member apiservers at the end (old tokens rejected,
    /// one more probe period), counted after the rotation's start.
    pub connections: ConnectionCount,
}

impl RotationReport {
    /// Token-cache fetches per rotated Secret.
    pub fn fetches_per_secret(&self) -> f64 {
        self.fetches / self.members.max(1) as f64
    }
}
