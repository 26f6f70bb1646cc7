//! The Helm chart rendered by a real `helm` binary.

use std::{path::Path, process::Command};

use anyhow::{Context as _, ensure};
use serde_json::Value;

use crate::{
    manifest::{chart_dir, parse_documents},
    rbac_grants::COLLECTOR_SA,
};

/// Renders the chart with `helm template` as release `tether` in the collector's namespace,
/// for `kube_version`, with `values` if given. The binary is `HELM`, else `helm` on `PATH`.
///
/// # Errors
/// No helm, or helm failing or printing what does not parse.
pub fn helm_template(kube_version: &str, values: Option<&Path>) -> anyhow::Result<Vec<Value>> {
    let helm = std::env::var("HELM").unwrap_or_else(|_| "helm".to_owned());
    let mut command = Command::new(&helm);
    command.args(["template", "tether"]).arg(chart_dir()).args([
        "--namespace",
        COLLECTOR_SA.0,
        "--kube-version",
        kube_version,
    ]);
    if let Some(values) = values {
        command.arg("--values").arg(values);
    }
    let output = command
        .output()
        .with_context(|| format!("running {helm} (set HELM or put helm on PATH)"))?;
    ensure!(
        output.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    parse_documents(&String::from_utf8(output.stdout)?, "helm template")
}
