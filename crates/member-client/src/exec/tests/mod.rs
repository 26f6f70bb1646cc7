//! [`run`] against real `#!/bin/sh` plugins written at test time.

mod allow_list;
mod concurrency;
mod descendants;
mod failures;
mod properties;
mod sandbox;

use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use rstest::rstest;
use secrecy::ExposeSecret as _;
use serde_json::{Value, json};
use tokio::sync::RwLock;

use super::*;
use crate::Text;

const V1: &str = "client.authentication.k8s.io/v1";
const V1BETA1: &str = "client.authentication.k8s.io/v1beta1";

/// NB: exec fails with ETXTBSY if any process holds the file open for writing, and a test that
/// forks while another writes a script hands its child that descriptor until the child execs.
/// Writing a script takes this exclusively; a run holds it shared.
static SCRIPTS: RwLock<()> = RwLock::const_new(());

struct Plugins(tempfile::TempDir);

impl Plugins {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }

    fn path(&self, name: &str) -> PathBuf {
        fs::canonicalize(self.0.path()).unwrap().join(name)
    }

    /// A `#!/bin/sh` script that runs `body` in this directory.
    async fn script(&self, name: &str, body: &str) -> PathBuf {
        let dir = self.path("");
        let text = format!("#!/bin/sh\ncd '{}' || exit 99\n{body}\n", dir.display());
        self.executable(name, &text).await
    }

    async fn executable(&self, name: &str, text: &str) -> PathBuf {
        let _exclusive = SCRIPTS.write().await;
        let path = self.path(name);
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Writes `body` as a plugin and runs it under its allowing policy.
    async fn run(&self, body: &str) -> Result<ExecOutput, ExecError> {
        let plugin = self.script("plugin", body).await;
        run_plugin(&config(&plugin), &allow(&plugin)).await
    }

    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.path(name)).unwrap()
    }
}

/// A shell line that prints a v1 ExecCredential with the token `t`.
const PRINTS_T: &str = r#"echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}'"#;

/// A shell line that prints an ExecCredential.
fn prints(api_version: &str, status: &str) -> String {
    format!(
        "cat <<'EOF'\n{{\"apiVersion\":\"{api_version}\",\"kind\":\"ExecCredential\",\"status\":{status}}}\nEOF"
    )
}

fn config(plugin: &Path) -> ExecConfig {
    ExecConfig::new(plugin.display().to_string())
}

fn allow(plugin: &Path) -> ExecPolicy {
    ExecPolicy::new([plugin.to_path_buf()]).with_timeout(Duration::from_secs(20))
}

async fn run_plugin(config: &ExecConfig, policy: &ExecPolicy) -> Result<ExecOutput, ExecError> {
    let _shared = SCRIPTS.read().await;
    run(config, policy).await
}

fn failure(result: Result<ExecOutput, ExecError>) -> ExecFailure {
    match result.unwrap_err() {
        ExecError::Failed(failure) => failure,
        other => panic!("not a plugin failure: {other:?}"),
    }
}

#[rstest]
#[case::v1(ExecApiVersion::V1, V1)]
#[case::v1beta1(ExecApiVersion::V1Beta1, V1BETA1)]
#[tokio::test]
async fn a_plugin_is_asked_in_its_version_and_returns_its_token_and_expiry(
    #[case] api_version: ExecApiVersion,
    #[case] name: &str,
) {
    let plugins = Plugins::new();
    let status = r#"{"token":"tok-1","expirationTimestamp":"2026-12-01T20:00:00.25Z"}"#;
    let body = format!(
        "printf '%s' \"$KUBERNETES_EXEC_INFO\" > info\n{}",
        prints(name, status)
    );
    let plugin = plugins.script("plugin", &body).await;
    let config = ExecConfig {
        api_version,
        ..config(&plugin)
    };
    let out = run_plugin(&config, &allow(&plugin)).await.unwrap();
    assert_eq!(out.token.unwrap().expose_secret(), "tok-1");
    let want = SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_155_200_250);
    assert_eq!(out.expires_at, Some(want));
    let info: Value = serde_json::from_str(&plugins.read("info")).unwrap();
    assert_eq!(info["apiVersion"], name);
}

/// Copies what it was given into files, then prints a credential.
const RECORDER: &str = r#"for a in "$@"; do printf '[%s]' "$a"; done > args
printf '%s' "$TETHER_TEST_VAR" > var
printf '%s' "$PATH" > path
printf '%s' "$HOME" > home
env | cut -d= -f1 | sort > names
printf '%s' "$KUBERNETES_EXEC_INFO" > info
cat > stdin"#;

/// `plugin`, accepting three definition arguments and `TETHER_TEST_VAR`, with one fixed
/// argument and one fixed variable.
fn declared(plugin: &Path) -> ExecPolicy {
    let rules: DefinitionRules = serde_json::from_value(json!({
        "definitionArgs": [{"pattern": "--flag"}, {"pattern": "[a-z ]+"}, {"pattern": ""}],
        "definitionEnv": [{"name": "TETHER_TEST_VAR", "pattern": ".*"}],
    }))
    .unwrap();
    let fixed = vec![ExecEnvVar::new("TETHER_FIXED", "fixed")];
    let declaration =
        PluginDeclaration::new(plugin, vec!["fixed-arg".to_owned()], fixed, rules).unwrap();
    ExecPolicy::declaring([declaration]).with_timeout(Duration::from_secs(20))
}

fn cluster() -> ExecCluster {
    ExecCluster {
        certificate_authority_data: Some(b"-----BEGIN CERTIFICATE-----\nAB\n".to_vec()),
        tls_server_name: Some("member1.internal".to_owned()),
        proxy_url: Some("http://proxy:3128".to_owned()),
        config: Some(json!({"audience": "tether", "scopes": ["a", "b"]})),
        ..ExecCluster::new("https://10.0.0.1:6443")
    }
}

#[tokio::test]
async fn args_env_and_the_cluster_reach_the_plugin_in_an_environment_built_from_nothing() {
    let plugins = Plugins::new();
    let dir = plugins.path("");
    // Where it starts, before it moves to where it writes.
    let text = format!(
        "#!/bin/sh\npwd > '{0}/cwd'\ncd '{0}' || exit 99\n{RECORDER}\n{PRINTS_T}\n",
        dir.display(),
    );
    let plugin = plugins.executable("plugin", &text).await;
    let config = ExecConfig {
        args: vec!["--flag".to_owned(), "two words".to_owned(), String::new()],
        env: vec![ExecEnvVar::new("TETHER_TEST_VAR", "a value; with $meta")],
        provide_cluster_info: true,
        cluster: Some(cluster()),
        ..config(&plugin)
    };
    run_plugin(&config, &declared(&plugin)).await.unwrap();

    assert_eq!(plugins.read("args"), "[fixed-arg][--flag][two words][]");
    assert_eq!(plugins.read("var"), "a value; with $meta");
    // Nothing of the collector's own environment is passed on.
    assert_eq!(plugins.read("path"), PLUGIN_PATH);
    let names = plugins.read("names");
    // The shell sets these itself.
    let shells = ["PWD", "OLDPWD", "SHLVL", "_"];
    let names: Vec<&str> = names.lines().filter(|n| !shells.contains(n)).collect();
    let want = "HOME KUBERNETES_EXEC_INFO PATH TETHER_FIXED TETHER_TEST_VAR";
    assert_eq!(names, want.split(' ').collect::<Vec<_>>());
    // A private HOME, the working directory, gone after the run.
    let home = plugins.read("home");
    assert!(home.contains("tether-exec-"), "{home}");
    assert_eq!(plugins.read("cwd").trim(), home);
    assert_ne!(Some(home.as_str()), std::env::var("HOME").ok().as_deref());
    assert!(!Path::new(&home).exists(), "{home} was not removed");
    assert_eq!(plugins.read("stdin"), "", "stdin must be null");
    let info: Value = serde_json::from_str(&plugins.read("info")).unwrap();
    assert_eq!(
        info,
        json!({
            "apiVersion": V1,
            "kind": "ExecCredential",
            "spec": {
                "interactive": false,
                "cluster": {
                    "server": "https://10.0.0.1:6443",
                    "tls-server-name": "member1.internal",
                    "certificate-authority-data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkFCCg==",
                    "proxy-url": "http://proxy:3128",
                    "config": {"audience": "tether", "scopes": ["a", "b"]},
                },
            },
        })
    );
}

#[tokio::test]
async fn without_provide_cluster_info_no_cluster_is_sent() {
    let plugins = Plugins::new();
    let body = format!("{RECORDER}\n{PRINTS_T}");
    let plugin = plugins.script("plugin", &body).await;
    let config = ExecConfig {
        cluster: Some(cluster()),
        ..config(&plugin)
    };
    run_plugin(&config, &allow(&plugin)).await.unwrap();
    let info: Value = serde_json::from_str(&plugins.read("info")).unwrap();
    assert_eq!(
        info,
        json!({"apiVersion": V1, "kind": "ExecCredential", "spec": {"interactive": false}})
    );
}
