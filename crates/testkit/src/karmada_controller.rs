//! Karmada's own `karmada-controller-manager` as a child process against a harness control
//! plane ([`KarmadaControllerManager`]), with the Karmada CRDs its controllers watch, taken
//! from the same module version as the binary ([`install_karmada_crds`]).
//!
//! The binary is the pinned tool `hack/tools/karmada-controller-manager/` (v1.18.2), built by
//! `hack/tools.sh`. Upstream serves `Cluster` from karmada-aggregated-apiserver; here it is the
//! repository's `Cluster` CRD that [`crate::Karmada::install`] installs, so whatever Karmada
//! writes outside that schema (taints, API enablements, resource summaries) is pruned.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use base64::Engine as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client, api::PostParams};

use crate::{
    assets::repo_root,
    cluster::Cluster,
    eventually::eventually,
    process::{ServerProcess, log_tail},
    tools,
};

/// The tool's name under `hack/tools/` and in `.tools/bin/`.
pub const TOOL: &str = "karmada-controller-manager";

/// The module that provides the binary and the CRDs.
const KARMADA_MODULE: &str = "github.com/karmada-io/karmada";

/// The controllers it runs: the cluster controller (finalizers, execution namespaces, health
/// monitoring) and the cluster-status controller (the `Ready` condition, member informers).
pub const CONTROLLERS: &str = "cluster,clusterStatus";

/// How long the control plane may take to establish Karmada's CRDs.
const CRDS_ESTABLISHED: Duration = Duration::from_secs(30);

/// The directory of the pinned karmada module in the Go module cache, as
/// `go mod download -json` reports it in the tool's wrapper module (downloading it on a cold
/// cache). Uses `$GO`, else `go` on `PATH`, else `/usr/local/go/bin/go`, as `hack/tools.sh`.
///
/// # Errors
/// No Go, the download failing, or an answer without `Dir`.
pub fn karmada_module_dir() -> Result<PathBuf> {
    let go = std::env::var_os("GO")
        .map(PathBuf::from)
        .or_else(|| {
            let local = Path::new("/usr/local/go/bin/go");
            let on_path = Command::new("go").arg("version").output().is_ok();
            match (on_path, local.is_file()) {
                (true, _) => Some(PathBuf::from("go")),
                (false, true) => Some(local.to_owned()),
                (false, false) => None,
            }
        })
        .context("no Go toolchain: set GO or put go on PATH")?;
    let wrapper = repo_root().join("hack/tools").join(TOOL);
    let out = Command::new(&go)
        .current_dir(&wrapper)
        .args(["mod", "download", "-json", KARMADA_MODULE])
        .env("GOTOOLCHAIN", "local")
        .env("GOWORK", "off")
        .env("GOFLAGS", "-mod=readonly")
        .output()
        .with_context(|| format!("running {} mod download", go.display()))?;
    if !out.status.success() {
        bail!(
            "go mod download {KARMADA_MODULE} failed in {}: {}",
            wrapper.display(),
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    let info: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("go mod download -json printed no JSON")?;
    let dir = info["Dir"].as_str().with_context(|| {
        format!(
            "go mod download -json gave no Dir: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    Ok(PathBuf::from(dir))
}

/// Creates every CRD under the karmada module's `charts/karmada/_crds/bases/` (work, policy,
/// config, … — what the controller-manager's resource detector and interpreter watch at
/// start) through `client`, and returns their names once all are established.
///
/// # Errors
/// The module not found ([`karmada_module_dir`]), an unparsable CRD, API errors, or a CRD not
/// established within 30 s.
pub async fn install_karmada_crds(client: &Client) -> Result<Vec<String>> {
    let bases = karmada_module_dir()?.join("charts/karmada/_crds/bases");
    let mut files = Vec::new();
    for group in
        std::fs::read_dir(&bases).with_context(|| format!("reading {}", bases.display()))?
    {
        for file in std::fs::read_dir(group?.path())? {
            let path = file?.path();
            if path.extension().is_some_and(|ext| ext == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let mut names = Vec::with_capacity(files.len());
    for path in files {
        let yaml = std::fs::read_to_string(&path)?;
        let crd: CustomResourceDefinition =
            serde_yaml::from_str(&yaml).with_context(|| format!("parsing {}", path.display()))?;
        let created = crds.create(&PostParams::default(), &crd).await;
        let created = created.with_context(|| format!("creating the CRD {}", path.display()))?;
        names.push(created.metadata.name.unwrap_or_default());
    }
    eventually(
        "Karmada's CRDs are established",
        CRDS_ESTABLISHED,
        || async {
            for name in &names {
                let crd = crds.get(name).await?;
                let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
                let established = conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                anyhow::ensure!(established, "{name} is not established yet");
            }
            anyhow::Ok(())
        },
    )
    .await?;
    Ok(names)
}

/// A `karmada-controller-manager` running against a control plane until dropped (then killed).
pub struct KarmadaControllerManager {
    process: ServerProcess,
}

impl KarmadaControllerManager {
    /// Starts the pinned binary ([`TOOL`], built first if stale) against `control_plane` as its
    /// admin, with a kubeconfig and its log (`karmada-controller-manager.log`) in `dir`:
    /// `--controllers=`[`CONTROLLERS`], no leader election, no metrics or health-probe
    /// listener, then `extra_args`. Install the CRDs first ([`crate::Karmada::install`],
    /// [`install_karmada_crds`]). It does not wait: a test waits for what Karmada writes.
    ///
    /// # Errors
    /// The tool not built, `dir` not writable, or the spawn failing.
    pub fn start(control_plane: &Cluster, dir: &Path, extra_args: &[&str]) -> Result<Self> {
        let binary = tools::binary(TOOL)?;
        let kubeconfig = dir.join("karmada-controller-manager.kubeconfig");
        write_kubeconfig(control_plane, &kubeconfig)?;
        let mut cmd = Command::new(binary);
        cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg(format!("--controllers={CONTROLLERS}"))
            .arg("--metrics-bind-address=0")
            .arg("--health-probe-bind-address=0")
            .args(extra_args);
        let log = dir.join("karmada-controller-manager.log");
        let process = ServerProcess::spawn(cmd, log, TOOL.to_owned())?;
        Ok(Self { process })
    }

    /// Where its output goes.
    pub fn log_path(&self) -> &Path {
        self.process.log()
    }

    /// Its output so far.
    ///
    /// # Errors
    /// The log not readable.
    pub fn log(&self) -> Result<String> {
        let bytes = std::fs::read(self.log_path())
            .with_context(|| format!("reading {}", self.log_path().display()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The last `lines` lines of its output, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(self.log_path(), lines)
    }

    /// `Ok` while it runs; once it has exited, an error with its exit status and log tail.
    ///
    /// # Errors
    /// It has exited.
    pub fn ensure_running(&mut self) -> Result<()> {
        match self.process.exited()? {
            None => Ok(()),
            Some(status) => bail!(
                "{TOOL} exited ({status}); its log ends:\n{}",
                self.log_tail(30)
            ),
        }
    }
}

/// Writes a kubeconfig for `control_plane`'s admin (endpoint, CA, admin token) to `path`.
fn write_kubeconfig(control_plane: &Cluster, path: &Path) -> Result<()> {
    let ca = base64::engine::general_purpose::STANDARD.encode(control_plane.ca_pem());
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "karmada", "cluster": {
            "server": control_plane.endpoint(),
            "certificate-authority-data": ca,
        }}],
        "users": [{ "name": "admin", "user": { "token": control_plane.admin_token()? } }],
        "contexts": [{ "name": "karmada", "context": { "cluster": "karmada", "user": "admin" } }],
        "current-context": "karmada",
    });
    // JSON is YAML, which client-go's kubeconfig loader reads.
    std::fs::write(path, serde_json::to_vec_pretty(&kubeconfig)?)
        .with_context(|| format!("writing {}", path.display()))
}
