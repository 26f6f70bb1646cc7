//! A plugin run as another user (`--exec-run-as`) cannot read what only the collector's user
//! may: a `0600` file standing in for the collector's ServiceAccount token.

use std::os::unix::fs::MetadataExt as _;

use super::*;

/// Prints the file named by the fixed argument as the token; fails if it cannot be read.
const READS_THE_FILE: &str = r#"token=$(cat "$1") || exit 3
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$token""#;

/// The user plugins run as here.
const NOBODY: RunAs = RunAs {
    uid: 65534,
    gid: 65534,
};

/// A plugin directory readable by [`NOBODY`]; `None` unless the tests run as root, since
/// switching users needs CAP_SETUID (the tests run as root in CI).
fn plugins_for_nobody() -> Option<Plugins> {
    if rustix::process::geteuid().as_raw() != 0 {
        return None;
    }
    let plugins = Plugins::new();
    fs::set_permissions(plugins.path(""), fs::Permissions::from_mode(0o755)).unwrap();
    Some(plugins)
}

#[tokio::test]
async fn a_plugin_run_as_another_user_cannot_read_the_collectors_token() {
    let Some(plugins) = plugins_for_nobody() else {
        return;
    };
    // The plugin itself must be readable by its user; the "token" must not be.
    let plugin = plugins.script("plugin", READS_THE_FILE).await;
    let token = plugins.path("sa-token");
    fs::write(&token, "collector-sa-s3cr3t").unwrap();
    fs::set_permissions(&token, fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(fs::metadata(&token).unwrap().uid(), 0);
    let declaration = PluginDeclaration::new(
        &plugin,
        vec![token.display().to_string()],
        vec![],
        DefinitionRules::default(),
    )
    .unwrap();
    let policy = ExecPolicy::declaring([declaration]).with_timeout(Duration::from_secs(20));

    // As the collector's own user it reads the file: the test can tell.
    let out = run_plugin(&config(&plugin), &policy).await.unwrap();
    assert_eq!(out.token.unwrap().expose_secret(), "collector-sa-s3cr3t");

    let sandboxed = policy.with_run_as(Some(NOBODY));
    let failed = failure(run_plugin(&config(&plugin), &sandboxed).await);
    let text = failed.to_string();
    let exited_3 = matches!(failed, ExecFailure::Exited { code: Some(3), .. });
    assert!(exited_3, "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert!(!text.contains("s3cr3t"), "{text}");
}

#[tokio::test]
async fn a_plugin_run_as_another_user_gets_a_home_of_its_own() {
    let Some(plugins) = plugins_for_nobody() else {
        return;
    };
    let body = format!(
        "touch \"$HOME/written\" || exit 4\n[ \"$(id -u):$(id -g):$(id -G)\" = '65534:65534:65534' ] || exit 5\n{PRINTS_T}"
    );
    let plugin = plugins.script("plugin", &body).await;
    let policy = allow(&plugin).with_run_as(Some(NOBODY));
    run_plugin(&config(&plugin), &policy).await.unwrap();
}
