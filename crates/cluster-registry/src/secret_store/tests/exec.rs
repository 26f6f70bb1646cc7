//! Exec plans and stored certificates, judged on fetch: plugins run under the store's policy,
//! once for any number of concurrent cache misses.

use std::{
    collections::BTreeSet,
    os::unix::fs::PermissionsExt as _,
    path::PathBuf,
    time::{Duration, Instant},
};

use member_client::{
    CredentialCache, CredentialCacheConfig, CredentialKind,
    client_identity::ClientIdentity,
    client_identity::IdentityError,
    exec::ExecError,
    exec::{ExecCluster, ExecConfig, ExecEnvVar},
};
use tokio::sync::RwLock;

use super::*;
use crate::{
    InvalidReason,
    stored_credential::ExecPlan,
    test_ca::{ca_pem, client_pem, expired_client_pem},
};

/// NB: exec fails with ETXTBSY while any process holds the script open for writing, and a
/// test that forks while another writes a script hands its child that descriptor until the
/// child execs. Writing a script takes this exclusively; a run holds it shared.
static SCRIPTS: RwLock<()> = RwLock::const_new(());

const PRINTS_A_TOKEN: &str = "cat <<'EOF'\n\
    {\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\
    \"status\":{\"token\":\"exec-token\"}}\nEOF";

/// A `#!/bin/sh` plugin in a temp dir that appends a line to `count` each time it runs, then
/// runs `body`.
struct Plugin {
    dir: tempfile::TempDir,
    path: PathBuf,
}

impl Plugin {
    async fn new(body: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap().join("plugin");
        let text = format!(
            "#!/bin/sh\ncd '{}' || exit 99\necho run >> count\n{body}\n",
            dir.path().display()
        );
        let _exclusive = SCRIPTS.write().await;
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir, path }
    }

    /// How often it ran.
    fn runs(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("count"))
            .map(|count| count.lines().count())
            .unwrap_or(0)
    }

    fn policy(&self) -> ExecPolicy {
        ExecPolicy::new([self.path.clone()]).with_timeout(Duration::from_secs(20))
    }

    fn config(&self) -> ExecConfig {
        ExecConfig {
            provide_cluster_info: true,
            cluster: Some(ExecCluster::new("https://10.0.0.1:6443")),
            ..ExecConfig::new(self.path.display().to_string())
        }
    }
}

fn exec_secret(config: ExecConfig, ca_bundle: Option<Bytes>) -> StoredSecret {
    StoredSecret::parsed(Ok::<_, SourceError>(StoredCredential::Exec(Arc::new(
        ExecPlan {
            config,
            ca_bundle,
            declaration: None,
        },
    ))))
}

#[tokio::test]
async fn an_exec_plan_runs_its_plugin_under_the_stores_policy_on_each_fetch() {
    let plugin = Plugin::new(&format!(
        "printf '%s' \"$KUBERNETES_EXEC_INFO\" > info\n{PRINTS_A_TOKEN}"
    ))
    .await;
    let ca = Bytes::from(ca_pem());
    let store = SecretStore::with_exec_policy(plugin.policy());
    store.insert(key(), exec_secret(plugin.config(), Some(ca.clone())));
    let _running = SCRIPTS.read().await;

    assert_eq!(store.usable(&key()).unwrap(), Some(ca.clone()));
    assert_eq!(plugin.runs(), 0, "judging usability runs nothing");
    let credential = store.fetch(&key()).await.unwrap();
    assert_eq!(credential.token().unwrap().expose_secret(), "exec-token");
    assert_eq!(credential.kind(), CredentialKind::Exec);
    assert_eq!(credential.ca_bundle(), Some(&ca));
    let info = std::fs::read_to_string(plugin.dir.path().join("info")).unwrap();
    assert!(info.contains("https://10.0.0.1:6443"), "{info}");
    store.fetch(&key()).await.unwrap();
    assert_eq!(plugin.runs(), 2, "caching is the token cache's job");
}

#[tokio::test]
async fn a_plugin_off_the_allow_list_is_exec_not_allowed_and_never_runs() {
    let plugin = Plugin::new(PRINTS_A_TOKEN).await;
    let other = Plugin::new(PRINTS_A_TOKEN).await;
    let _running = SCRIPTS.read().await;
    for store in [
        SecretStore::new(),
        SecretStore::with_exec_policy(other.policy()),
    ] {
        store.insert(key(), exec_secret(plugin.config(), None));
        let usable = store.usable(&key()).unwrap_err();
        for err in [usable, store.fetch(&key()).await.unwrap_err()] {
            let not_allowed = matches!(err, SourceError::Exec(ExecError::NotAllowed { .. }));
            assert!(not_allowed, "{err:?}");
            assert_eq!(reason_of(&err), "ExecNotAllowed");
        }
    }
    assert_eq!((plugin.runs(), other.runs()), (0, 0));
}

fn reason_of(err: &SourceError) -> &'static str {
    InvalidReason::from(err).condition_reason()
}

/// An allowed plugin told to load other code (`LD_PRELOAD`) is refused before it is ever
/// run, so the member is `ExecNotAllowed` from its definition on.
#[tokio::test]
async fn an_env_var_that_chooses_code_is_exec_not_allowed_at_once() {
    let plugin = Plugin::new(PRINTS_A_TOKEN).await;
    let _running = SCRIPTS.read().await;
    let store = SecretStore::with_exec_policy(plugin.policy());
    let mut config = plugin.config();
    config.env = vec![ExecEnvVar::new("LD_PRELOAD", "/tmp/evil.so")];
    store.insert(key(), exec_secret(config, None));
    let err = store.usable(&key()).unwrap_err();
    assert!(
        matches!(err, SourceError::Exec(ExecError::EnvNotAllowed { .. })),
        "{err:?}"
    );
    assert_eq!(reason_of(&err), "ExecNotAllowed");
    assert_eq!(plugin.runs(), 0);
}

#[tokio::test]
async fn a_failing_plugin_is_exec_failed_and_transient() {
    let plugin = Plugin::new("echo 'no credentials for you' >&2\nexit 3").await;
    let store = SecretStore::with_exec_policy(plugin.policy());
    store.insert(key(), exec_secret(plugin.config(), None));
    let _running = SCRIPTS.read().await;
    let err = store.fetch(&key()).await.unwrap_err();
    assert!(
        matches!(err, SourceError::Exec(ExecError::Failed(_))),
        "{err:?}"
    );
    assert!(err.is_transient());
    let reason = InvalidReason::from(&err);
    assert_eq!(reason.condition_reason(), "ExecFailed", "{reason}");
    assert_eq!(plugin.runs(), 1);
}

#[tokio::test]
async fn an_expired_stored_certificate_is_certificate_expired_on_fetch() {
    let identity = |(cert, key): (String, String)| {
        let identity = ClientIdentity::from_pem(cert.as_bytes(), key.as_bytes()).unwrap();
        StoredSecret::parsed(Ok::<_, SourceError>(Credential::from_identity(identity)))
    };
    let store = SecretStore::new();
    store.insert(key(), identity(expired_client_pem("old")));
    let err = store.fetch(&key()).await.unwrap_err();
    assert!(
        matches!(err, SourceError::Identity(IdentityError::Expired { .. })),
        "{err:?}"
    );
    assert_eq!(reason_of(&err), "CertificateExpired");
    store.insert(key(), identity(client_pem("current")));
    let credential = store.fetch(&key()).await.unwrap();
    assert_eq!(credential.identity().unwrap().subject(), "current");
}

/// The proof that exec is single-flight: 1,000 concurrent misses on a cold cache run the
/// plugin once. The plugin holds its run open until every `get` has missed (a bounded wait on
/// a file the test creates), so every one of them overlaps the run, however slow the machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_cold_gets_run_the_plugin_once() {
    const GETS: u64 = 1_000;
    let plugin = Plugin::new(&format!(
        "n=0\nwhile [ ! -e go ] && [ $n -lt 1000 ]; do sleep 0.01; n=$((n+1)); done\n\
         sleep 0.2\n{PRINTS_A_TOKEN}"
    ))
    .await;
    let store = SecretStore::with_exec_policy(plugin.policy());
    store.insert(key(), exec_secret(plugin.config(), None));
    let cache = CredentialCache::new(store, CredentialCacheConfig::default());
    let _running = SCRIPTS.read().await;

    let started = Instant::now();
    let mut gets = tokio::task::JoinSet::new();
    for _ in 0..GETS {
        let cache = cache.clone();
        gets.spawn(async move { cache.get(&key()).await });
    }
    tokio::time::timeout(Duration::from_secs(10), async {
        while cache.stats().misses < GETS {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("every get misses while the plugin runs");
    std::fs::write(plugin.dir.path().join("go"), "").unwrap();

    let mut generations = BTreeSet::new();
    while let Some(got) = gets.join_next().await {
        let credential = got.unwrap().unwrap();
        assert_eq!(credential.token().unwrap().expose_secret(), "exec-token");
        generations.insert(credential.generation());
    }
    let runs = plugin.runs();
    println!(
        "{GETS} concurrent gets: {runs} plugin run(s), {} misses, {:?}",
        cache.stats().misses,
        started.elapsed()
    );
    assert_eq!(runs, 1, "the plugin ran {runs} times");
    assert_eq!(generations.len(), 1, "every get shares one load");
}
