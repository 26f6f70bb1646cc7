//! [`TokenRequestPlugin`]: running `e2e/plugins/tokenrequest-plugin.py` for a member.

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

/// The files and variables `e2e/plugins/tokenrequest-plugin.py` needs to mint tokens for one
/// ServiceAccount of a member, in a fresh [`temp_dir`], and the count of its runs.
pub struct TokenRequestPlugin {
    dir: PathBuf,
    env: Vec<(&'static str, String)>,
}

impl TokenRequestPlugin {
    /// Writes `member`'s serving CA and admin token where the plugin reads them; it mints for
    /// ServiceAccount `namespace/service_account`.
    ///
    /// # Errors
    /// I/O errors, or a member without an admin token.
    pub fn for_service_account(
        member: &Cluster,
        namespace: &str,
        service_account: &str,
    ) -> anyhow::Result<Self> {
        let dir = temp_dir("tokenrequest-plugin")?;
        let file = |name: &str| dir.join(name).display().to_string();
        std::fs::write(dir.join("ca.crt"), member.ca_pem())?;
        std::fs::write(dir.join("admin-token"), member.admin_token()?)?;
        let env = vec![
            ("PLUGIN_SERVER", member.endpoint().to_owned()),
            ("PLUGIN_CA_FILE", file("ca.crt")),
            ("PLUGIN_ADMIN_TOKEN_FILE", file("admin-token")),
            (
                "PLUGIN_SERVICE_ACCOUNT",
                format!("{namespace}/{service_account}"),
            ),
            ("PLUGIN_COUNT_FILE", file("count")),
        ];
        Ok(Self { dir, env })
    }

    /// The kubeconfig `env` entries.
    pub fn env(&self) -> &[(&'static str, String)] {
        &self.env
    }

    /// Writes an `--exec-plugins` file beside the plugin's files that declares `command` and
    /// accepts exactly these variables from a definition, each value by a pattern (a member
    /// definition passes nothing else to a plugin); returns its path.
    ///
    /// # Errors
    /// I/O errors.
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
        let path = self.dir.join("exec-plugins.yaml");
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

    /// When the plugin ran (one line per run, as the plugin stamps them).
    pub fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("count"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}
