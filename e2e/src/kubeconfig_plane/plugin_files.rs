//! What the test exec plugins of `e2e/plugins/` read ([`PluginFiles`]), and
//! [`TokenRequestPlugin`].

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use testkit::Cluster;

use crate::collector_run::temp_dir;

/// The absolute path of `e2e/plugins/<name>`.
///
/// # Errors
/// If it does not exist.
pub fn plugin_path(name: &str) -> anyhow::Result<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("plugins")
        .join(name);
    std::fs::canonicalize(&path).with_context(|| format!("no plugin at {}", path.display()))
}

/// One apiserver's serving CA and admin token where every plugin reads them, in a fresh
/// [`temp_dir`], the variables that point a plugin at them, and the count of its runs.
pub struct PluginFiles {
    dir: PathBuf,
    server: String,
}

impl PluginFiles {
    /// Writes `cluster`'s serving CA (`ca.crt`) and admin token (`admin-token`) into a fresh
    /// [`temp_dir`] named after `name`.
    ///
    /// # Errors
    /// I/O errors, or a cluster without an admin token.
    pub fn for_cluster(cluster: &Cluster, name: &str) -> anyhow::Result<Self> {
        let dir = temp_dir(name)?;
        std::fs::write(dir.join("ca.crt"), cluster.ca_pem())?;
        std::fs::write(dir.join("admin-token"), cluster.admin_token()?)?;
        let server = cluster.endpoint().to_owned();
        Ok(Self { dir, server })
    }

    /// `file` in the directory.
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// `PLUGIN_SERVER`, `PLUGIN_CA_FILE`, `PLUGIN_ADMIN_TOKEN_FILE` and `PLUGIN_COUNT_FILE`
    /// for these files, then `extra`.
    pub fn env(&self, extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
        let file = |name: &str| self.path(name).display().to_string();
        let common = [
            ("PLUGIN_SERVER", self.server.clone()),
            ("PLUGIN_CA_FILE", file("ca.crt")),
            ("PLUGIN_ADMIN_TOKEN_FILE", file("admin-token")),
            ("PLUGIN_COUNT_FILE", file("count")),
        ];
        common.into_iter().chain(extra.iter().cloned()).collect()
    }

    /// When a plugin ran with these files (one line per run, as the plugins stamp them).
    pub fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(self.path("count"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// The files and variables `e2e/plugins/tokenrequest-plugin.py` needs to mint tokens for one
/// ServiceAccount of a member.
pub struct TokenRequestPlugin {
    files: PluginFiles,
    env: Vec<(&'static str, String)>,
}

impl TokenRequestPlugin {
    /// The plugin minting for ServiceAccount `namespace/service_account` of `member`.
    pub fn for_service_account(
        member: &Cluster,
        namespace: &str,
        service_account: &str,
    ) -> anyhow::Result<Self> {
        let files = PluginFiles::for_cluster(member, "tokenrequest-plugin")?;
        let account = format!("{namespace}/{service_account}");
        let env = files.env(&[("PLUGIN_SERVICE_ACCOUNT", account)]);
        Ok(Self { files, env })
    }

    /// The kubeconfig `env` entries.
    pub fn env(&self) -> &[(&'static str, String)] {
        &self.env
    }

    /// Writes an `--exec-plugins` file beside the plugin's files that declares `command` and
    /// accepts exactly these variables from a definition, each value by a pattern (a member
    /// definition passes nothing else to a plugin); returns its path.
    pub fn exec_plugins_file(&self, command: &Path) -> anyhow::Result<PathBuf> {
        let file = "/[A-Za-z0-9._/-]+";
        let env = [
            ("PLUGIN_SERVER", r"https://127\.0\.0\.1:[0-9]{1,5}"),
            ("PLUGIN_CA_FILE", file),
            ("PLUGIN_ADMIN_TOKEN_FILE", file),
            ("PLUGIN_SERVICE_ACCOUNT", "[a-z0-9-]{1,63}/[a-z0-9-]{1,253}"),
            ("PLUGIN_COUNT_FILE", file),
        ];
        let env: Vec<String> = (env.iter())
            .map(|(name, pattern)| format!("  - {{name: {name}, pattern: '{pattern}'}}\n"))
            .collect();
        let path = self.files.path("exec-plugins.yaml");
        std::fs::write(
            &path,
            format!(
                "providers:\n- name: tokenrequest\n  execConfig:\n    command: {}\n  \
                 definitionEnv:\n{}",
                command.display(),
                env.concat()
            ),
        )?;
        Ok(path)
    }

    /// When the plugin ran.
    pub fn runs(&self) -> Vec<String> {
        self.files.runs()
    }
}
