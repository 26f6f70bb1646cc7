//! Fresh namespaces: without kube-controller-manager a deleted namespace stays `Terminating`
//! forever, so every test takes a new name instead of reusing one.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::cluster::Cluster;

/// Numbers namespaces within this process; the time suffix separates processes.
static NEXT: AtomicU32 = AtomicU32::new(0);

impl Cluster {
    /// Creates a namespace named `<prefix>-<unique suffix>` and returns its name.
    ///
    /// # Errors
    /// If `prefix` is not a short DNS label (at most 40 characters) or the API call fails.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String> {
        ensure!(
            !prefix.is_empty()
                && prefix.len() <= 40
                && prefix
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "namespace prefix {prefix:?} must be 1-40 characters of [a-z0-9-]"
        );
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        let name = format!("{prefix}-{:x}{n}", millis & 0xff_ffff);
        self.create_namespace_named(&name).await?;
        Ok(name)
    }

    /// Creates namespace `name` as it is, for the few names a component expects (Karmada's
    /// `karmada-cluster`, the collector's `tether-system`). Prefer
    /// [`create_namespace`](Self::create_namespace) anywhere else.
    ///
    /// # Errors
    /// If it exists already (even `Terminating`) or the API call fails.
    pub async fn create_namespace_named(&self, name: &str) -> Result<()> {
        let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": name } }))?;
        Api::<Namespace>::all(self.admin_client()?)
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name} on {}", self.name()))?;
        Ok(())
    }
}
