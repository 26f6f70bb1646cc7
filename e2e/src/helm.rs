//! The Helm chart rendered and linted by a real `helm`, the pinned one `hack/tools.sh` builds
//! (`testkit::tools::binary`), so every machine and CI run the same helm.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use anyhow::{Context as _, ensure};
use serde_json::Value;

use crate::{
    manifest::{chart_dir, parse_documents, repo_root},
    rbac_grants::COLLECTOR_SA,
};

/// The Kubernetes version the chart is rendered for: the harness's kube-apiserver, as pinned
/// by `KUBERNETES_VERSION` in `hack/versions.env`. The chart's `kubeVersion` is `>=1.33`, and
/// helm would otherwise assume the version it was built for.
///
/// # Errors
/// The file cannot be read or does not pin the version.
pub fn kube_version() -> anyhow::Result<String> {
    let path = repo_root().join("hack/versions.env");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .find_map(|line| line.trim().strip_prefix("KUBERNETES_VERSION="))
        .map(|version| version.trim().to_owned())
        .with_context(|| format!("{} has no KUBERNETES_VERSION=", path.display()))
}

/// The chart's CI values files, `deploy/helm/tether/ci/*.yaml`, sorted by name.
///
/// # Errors
/// The directory cannot be read.
pub fn ci_values_files() -> anyhow::Result<Vec<PathBuf>> {
    let dir = chart_dir().join("ci");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "yaml") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Runs the pinned helm `cmd` with `--values values` if given; fails with its output unless it
/// succeeds.
fn helm(mut cmd: Command, values: Option<&Path>) -> anyhow::Result<Output> {
    if let Some(values) = values {
        cmd.arg("--values").arg(values);
    }
    let output = cmd.output().context("running helm")?;
    ensure!(
        output.status.success(),
        "helm failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(output)
}

/// `helm` with its binary built or found by `hack/tools.sh`.
fn command() -> anyhow::Result<Command> {
    Ok(Command::new(testkit::tools::binary("helm")?))
}

/// Renders the chart with `helm template` as release `tether` in the collector's namespace,
/// for `kube_version`, with `values` if given.
///
/// # Errors
/// No helm (it cannot be built), or helm failing or printing what does not parse.
pub fn helm_template(kube_version: &str, values: Option<&Path>) -> anyhow::Result<Vec<Value>> {
    let mut template = command()?;
    template
        .args(["template", "tether"])
        .arg(chart_dir())
        .args([
            "--namespace",
            COLLECTOR_SA.0,
            "--kube-version",
            kube_version,
        ]);
    let output = helm(template, values).context("helm template")?;
    parse_documents(&String::from_utf8(output.stdout)?, "helm template")
}

/// `helm lint --strict` of the chart for `kube_version`, with `values` if given: warnings
/// fail too. Returns helm's report.
///
/// # Errors
/// No helm, or a lint error or warning (helm's report is in the error).
pub fn helm_lint(kube_version: &str, values: Option<&Path>) -> anyhow::Result<String> {
    let mut lint = command()?;
    lint.arg("lint")
        .arg(chart_dir())
        .args(["--strict", "--namespace", COLLECTOR_SA.0])
        .args(["--kube-version", kube_version]);
    let output = helm(lint, values).context("helm lint")?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `helm install --dry-run=server` of the chart as release `tether` into `namespace`
/// (`--create-namespace`), with `values` if given, on the cluster of `kubeconfig`: helm reads
/// the cluster's version and the release's history, and the apiserver validates what would be
/// installed; nothing is. Returns helm's report, the manifest included.
///
/// # Errors
/// No helm, or helm refusing the install (its report is in the error).
pub fn helm_install_dry_run(
    kubeconfig: &Path,
    namespace: &str,
    values: Option<&Path>,
) -> anyhow::Result<String> {
    let mut install = command()?;
    install
        .args(["install", "tether"])
        .arg(chart_dir())
        .args(["--namespace", namespace, "--create-namespace"])
        .args(["--dry-run=server", "--kubeconfig"])
        .arg(kubeconfig);
    let output = helm(install, values).context("helm install --dry-run=server")?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
