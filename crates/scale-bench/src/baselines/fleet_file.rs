//! The members a baseline process runs, as the bench hands them over: a JSON file read by the
//! Go anchors (`anchors/client-go-anchor`, whose `fleetFile` is this struct) and `rust-anchor`.
//! It holds the control plane's admin token, so it is written owner-only into the run's own
//! temporary directory, and it is not `Debug`.

use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// The largest fleet file read: 10,000 members with their CA bundles fit in a few MiB.
const MAX_FLEET_FILE: u64 = 64 * 1024 * 1024;

/// An apiserver, and the admin token the control plane is read with (empty for members).
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// PEM CA bundle of its serving certificate.
    #[serde(rename = "caPEM")]
    pub ca_pem: String,
    /// Bearer token (the control plane's admin; empty for members, whose token is the Secret).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
}

/// One member: its Secret on the control plane has its name.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetMember {
    /// `memberN`.
    pub name: String,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// PEM CA bundle of its apiserver.
    #[serde(rename = "caPEM")]
    pub ca_pem: String,
}

/// What a baseline process runs.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetFile {
    /// The control plane, where the member Secrets are.
    pub control_plane: Endpoint,
    /// Namespace of the member Secrets.
    pub secret_namespace: String,
    /// Namespace of the watched Deployments on the member apiservers.
    pub namespace: String,
    /// Name of the canary Deployment.
    pub canary: String,
    /// Period of each member's `SelfSubjectReview`, ms.
    pub probe_period_millis: u64,
    /// The members.
    pub members: Vec<FleetMember>,
}

impl FleetFile {
    /// Reads it from `path`.
    ///
    /// # Errors
    /// I/O errors, a file over 64 MiB, or not a fleet file.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        use std::io::Read as _;
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut raw = Vec::new();
        file.take(MAX_FLEET_FILE + 1)
            .read_to_end(&mut raw)
            .with_context(|| format!("reading {}", path.display()))?;
        anyhow::ensure!(
            raw.len() as u64 <= MAX_FLEET_FILE,
            "{} is over {MAX_FLEET_FILE} bytes",
            path.display()
        );
        serde_json::from_slice(&raw).with_context(|| format!("parsing {}", path.display()))
    }
}
