//! Where the `kube-apiserver` and `etcd` binaries come from.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::hack_script::{hack_script, printed_dir};

/// The environment variable envtest uses for the directory holding `kube-apiserver` and `etcd`.
pub const ASSETS_ENV: &str = "KUBEBUILDER_ASSETS";

/// The `kube-apiserver` and `etcd` binaries a test environment runs.
#[derive(Clone, Debug)]
pub struct Assets {
    dir: PathBuf,
}

impl Assets {
    /// Finds the binaries the envtest way.
    ///
    /// 1. `$KUBEBUILDER_ASSETS`, if set (it must hold both binaries);
    /// 2. otherwise the repository's `.envtest/<version>` directory, as printed by
    ///    `hack/envtest.sh` (which builds the binaries first if they are missing or stale;
    ///    that first build takes minutes and needs Go and the Go module proxy).
    ///
    /// # Errors
    /// If the variable points at a directory without both binaries, or `hack/envtest.sh`
    /// fails (its stderr is in the error).
    pub fn locate() -> Result<Self> {
        if let Some(dir) = std::env::var_os(ASSETS_ENV).filter(|d| !d.is_empty()) {
            return Self::from_dir(PathBuf::from(dir))
                .with_context(|| format!("${ASSETS_ENV} is set but unusable"));
        }
        let mut script = hack_script("envtest.sh");
        script.env_remove(ASSETS_ENV);
        let advice = format!(
            "; set ${ASSETS_ENV} to a directory holding kube-apiserver and etcd, or fix the build"
        );
        let dir = printed_dir(script, &advice)?;
        Self::from_dir(dir).context("hack/envtest.sh printed an unusable directory")
    }

    /// Uses the binaries in `dir`.
    ///
    /// # Errors
    /// If `dir` lacks an executable `kube-apiserver` or `etcd`.
    pub fn from_dir(dir: PathBuf) -> Result<Self> {
        for bin in ["kube-apiserver", "etcd"] {
            let path = dir.join(bin);
            if !path.is_file() {
                bail!("{} does not exist", path.display());
            }
        }
        Ok(Self { dir })
    }

    /// The directory holding the binaries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of the `kube-apiserver` binary.
    pub fn kube_apiserver(&self) -> PathBuf {
        self.dir.join("kube-apiserver")
    }

    /// Path of the `etcd` binary.
    pub fn etcd(&self) -> PathBuf {
        self.dir.join("etcd")
    }
}

/// The workspace root: this crate lives in `<root>/crates/testkit`. The `hack/` scripts that
/// build the harness's binaries are found from it.
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
