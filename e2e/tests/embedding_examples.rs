//! The embedding examples (`crates/member-client/examples/own_secret_store.rs`,
//! `crates/cluster-registry/examples/{registry_events,multicluster_controller}.rs`) run as the
//! programs an embedder would start: built binaries, each a child process pointed at a harness
//! control plane through a kubeconfig, while the test rotates and revokes member credentials
//! under it. Each is judged by what it prints, its exit status, and the members' state.
//!
//! `cargo test` builds examples only as test harnesses, so the programs are built first:
//! `hack/test.sh` runs `cargo build --workspace --examples` before the tests. A binary missing
//! or older than its example's source is refused with the command that builds it.

use std::{path::PathBuf, process::Stdio, time::Duration};

use anyhow::{Context as _, ensure};
use cluster_registry::karmada::Cluster as KarmadaCluster;
use e2e::{
    child_process::ChildProcess, kubeconfig_plane::Kubeconfig, limits::HOUR,
    manifest_apply::apply_object, scenario::karmada_environment,
};
use k8s_openapi::{ByteString, api::core::v1::ConfigMap, api::core::v1::Secret};
use kube::{
    Api,
    api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams},
};
use serde_json::json;
use testkit::{Cluster, Environment, PushMember, eventually};
use tokio::process::Command;

/// A bound on each thing awaited from an example: a line, a repaired object, its exit.
const DEADLINE: Duration = Duration::from_secs(30);

/// The bound on a whole test, whatever it waits for.
const TEST_DEADLINE: Duration = Duration::from_secs(180);

/// One example: its package, its crate's directory under `crates/`, and its name.
struct ExampleSource {
    package: &'static str,
    dir: &'static str,
    name: &'static str,
}

const OWN_SECRET_STORE: ExampleSource = ExampleSource {
    package: "member-client",
    dir: "member-client",
    name: "own_secret_store",
};
const REGISTRY_EVENTS: ExampleSource = ExampleSource {
    package: "tether-cluster-registry",
    dir: "cluster-registry",
    name: "registry_events",
};
const MULTICLUSTER_CONTROLLER: ExampleSource = ExampleSource {
    package: "tether-cluster-registry",
    dir: "cluster-registry",
    name: "multicluster_controller",
};

impl ExampleSource {
    /// The built binary (`target/debug/examples/<name>`), refused if it is missing or older
    /// than the example's source: a test of an old build would prove nothing.
    fn binary(&self) -> anyhow::Result<PathBuf> {
        let build = format!("cargo build -p {} --example {}", self.package, self.name);
        let binary = testkit::locate_binary(&format!("examples/{}", self.name))
            .with_context(|| format!("build the example first: {build}"))?;
        let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../crates/{}/examples/{}.rs", self.dir, self.name));
        let modified = |path: &PathBuf| std::fs::metadata(path).and_then(|m| m.modified());
        let (built, written) = (modified(&binary)?, modified(&source)?);
        ensure!(
            built >= written,
            "{} is older than {}: {build}",
            binary.display(),
            source.display()
        );
        Ok(binary)
    }

    /// Starts the built example with only `env` and `PATH` in its environment: no proxy
    /// variable reaches it, and it dials only the harness's loopback apiservers, which
    /// `ALLOW_ENDPOINT` lets it reach. Each line awaited and its stop are bounded by
    /// [`DEADLINE`].
    fn start(&self, kubeconfig: &PathBuf, env: &[(&str, &str)]) -> anyhow::Result<ChildProcess> {
        let mut cmd = Command::new(self.binary()?);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("KUBECONFIG", kubeconfig)
            .env("ALLOW_ENDPOINT", "127.0.0.1/32")
            .envs(env.iter().copied())
            .stdin(Stdio::null());
        ChildProcess::spawn(cmd, DEADLINE)
    }
}

/// Reads the example's lines until every one of `prefixes` starts some line read so far (in
/// any order, since the example started), each line within [`DEADLINE`].
async fn saw_all(example: &mut ChildProcess, prefixes: &[&str]) -> anyhow::Result<()> {
    let missing = |seen: &[String]| -> Option<String> {
        let started = |prefix: &&str| seen.iter().any(|line| line.starts_with(prefix));
        prefixes
            .iter()
            .find(|p| !started(p))
            .map(|p| (*p).to_owned())
    };
    while let Some(prefix) = missing(example.seen()) {
        let what = format!("line {prefix:?}…");
        let starts = |line: &str| Ok(line.starts_with(&prefix).then_some(()));
        example.until(&what, starts).await?;
    }
    Ok(())
}

/// Writes a kubeconfig for `control_plane`'s admin into `dir`: how the examples find it.
fn control_plane_kubeconfig(
    control_plane: &Cluster,
    dir: &tempfile::TempDir,
) -> anyhow::Result<PathBuf> {
    let path = dir.path().join("control-plane.kubeconfig");
    let yaml = Kubeconfig::token(control_plane, &control_plane.admin_token()?).to_yaml()?;
    std::fs::write(&path, yaml)?;
    Ok(path)
}

/// A member Secret as an embedder's own store might hold it: `token` and `ca.crt`.
fn member_secret(name: &str, token: &str, ca_pem: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(
            [("token", token), ("ca.crt", ca_pem)]
                .into_iter()
                .map(|(key, value)| (key.to_owned(), ByteString(value.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

fn user(ns: &str, account: &str) -> String {
    format!("system:serviceaccount:{ns}:{account}")
}

/// Ends the example with SIGTERM, checks that it exited 0, and returns every line it printed.
async fn stop_cleanly(example: ChildProcess) -> anyhow::Result<Vec<String>> {
    let (status, seen, stderr) = example.stop().await?;
    // Shown when the test fails (the harness captures it otherwise).
    eprintln!("stdout:\n{}\nstderr:\n{stderr}", seen.join("\n"));
    ensure!(status.success(), "exit {status}");
    ensure!(!seen.is_empty(), "it printed nothing");
    Ok(seen)
}

/// How many of `lines` start with `prefix`.
fn lines_starting(lines: &[String], prefix: &str) -> usize {
    lines.iter().filter(|line| line.starts_with(prefix)).count()
}

/// The number before `what` in `line` (`7` in `requests: 7 ok`).
fn count_before(line: &str, what: &str) -> anyhow::Result<u64> {
    let before = line.split(what).next().context("empty line")?;
    let number = before.rsplit(' ').find(|word| !word.is_empty());
    number
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("no count before {what:?} in {line:?}"))
}

#[tokio::test]
async fn own_secret_store_uses_each_rotation_without_a_restart() -> anyhow::Result<()> {
    tokio::time::timeout(TEST_DEADLINE, async {
        let env = Environment::with_members(1).await?;
        let (control_plane, member) = (env.control_plane(), env.cluster(1));
        let (ns, token_a) = member.create_agent("agents", "agent-a", HOUR).await?;
        let secrets_ns = control_plane.create_namespace("members").await?;
        let secrets = Api::<Secret>::namespaced(control_plane.admin_client()?, &secrets_ns);
        secrets
            .create(
                &PostParams::default(),
                &member_secret("member1", &token_a, member.ca_pem()),
            )
            .await?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = control_plane_kubeconfig(control_plane, &dir)?;
        let env_vars = [
            ("SECRET_NAMESPACE", secrets_ns.as_str()),
            ("SECRET_NAME", "member1"),
            ("MEMBER_URL", member.endpoint()),
        ];
        let mut example = OWN_SECRET_STORE.start(&kubeconfig, &env_vars)?;
        saw_all(
            &mut example,
            &[&format!("authenticated as {}", user(&ns, "agent-a"))],
        )
        .await?;

        // Rotate, revoke the old token, and rotate again: each is used by the running program.
        let rotate = |account: &'static str| {
            let (secrets, ns, member) = (secrets.clone(), ns.clone(), member.clone());
            async move {
                member.create_service_account(&ns, account).await?;
                let token = member.mint_token(&ns, account, HOUR).await?;
                let secret = member_secret("member1", &token, member.ca_pem());
                secrets
                    .patch("member1", &PatchParams::default(), &Patch::Merge(&secret))
                    .await?;
                anyhow::Ok(())
            }
        };
        rotate("agent-b").await?;
        let used = format!(
            "rotation used: {} -> {}",
            user(&ns, "agent-a"),
            user(&ns, "agent-b")
        );
        saw_all(&mut example, &[&used]).await?;
        member.revoke(&ns, "agent-a", &token_a).await?;
        rotate("agent-c").await?;
        let used = format!(
            "rotation used: {} -> {}",
            user(&ns, "agent-b"),
            user(&ns, "agent-c")
        );
        saw_all(&mut example, &[&used]).await?;

        let printed = stop_cleanly(example).await?;
        let last = &printed[printed.len() - 1];
        ensure!(
            lines_starting(&printed, "request failed") == 0,
            "no request failed"
        );
        ensure!(
            last.starts_with("requests: ") && last.ends_with(" ok, 0 failed; rotations used: 2"),
            "{last}"
        );
        ensure!(count_before(last, " ok,")? >= 3, "{last}");
        anyhow::Ok(())
    })
    .await
    .context("the test outlived its deadline")?
}

#[tokio::test]
async fn registry_events_keep_one_client_per_member() -> anyhow::Result<()> {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (env, karmada) = karmada_environment(2).await?;
        let (member1, member2) = (env.cluster(1), env.cluster(2));
        let (ns1, token_a) = member1.create_agent("agents", "agent-a", HOUR).await?;
        let (ns2, token2) = member2.create_agent("agents", "agent-a", HOUR).await?;
        karmada.register(&PushMember::of(member1, &token_a)).await?;
        karmada.register(&PushMember::of(member2, &token2)).await?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = control_plane_kubeconfig(env.control_plane(), &dir)?;
        let mut example = REGISTRY_EVENTS.start(&kubeconfig, &[])?;
        let upserted1 = format!("upserted member1 as {} (", user(&ns1, "agent-a"));
        let upserted2 = format!("upserted member2 as {} (", user(&ns2, "agent-a"));
        saw_all(&mut example, &[&upserted1, &upserted2]).await?;

        // Rotate member1: the client it holds is the same, and its next request is agent-b's.
        member1.create_service_account(&ns1, "agent-b").await?;
        let token_b = member1.mint_token(&ns1, "agent-b", HOUR).await?;
        karmada
            .write_secret("member1", &token_b, member1.ca_pem())
            .await?;
        let rotated = format!("rotated member1: now {}", user(&ns1, "agent-b"));
        saw_all(&mut example, &[&rotated]).await?;

        // member2's Cluster is deleted: its client goes.
        let clusters = Api::<KarmadaCluster>::all(karmada.client().clone());
        clusters.delete("member2", &DeleteParams::default()).await?;
        saw_all(&mut example, &["removed member2 (1 members)"]).await?;

        let printed = stop_cleanly(example).await?;
        for member in ["member1", "member2"] {
            let built = lines_starting(&printed, &format!("upserted {member} "));
            ensure!(
                built == 1,
                "{member}'s client built once, kept through rotation: {built}"
            );
        }
        let last = &printed[printed.len() - 1];
        ensure!(
            last == r#"members: ["member1"]; 0 failed requests"#,
            "{last}"
        );
        anyhow::Ok(())
    })
    .await
    .context("the test outlived its deadline")?
}

/// The namespace on every member where `multicluster_controller` keeps its ConfigMap.
const CONTROLLED_NS: &str = "team-a";

/// Lets every ServiceAccount of [`CONTROLLED_NS`] on `member` write ConfigMaps there (the
/// harness's reader role, bound cluster-wide, lets them read).
async fn grant_configmap_writes(member: &Cluster) -> anyhow::Result<()> {
    let client = member.admin_client()?;
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": { "name": "configmap-writer", "namespace": CONTROLLED_NS },
        "rules": [{ "apiGroups": [""], "resources": ["configmaps"],
                    "verbs": ["get", "list", "watch", "create", "patch"] }],
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": { "name": "configmap-writer", "namespace": CONTROLLED_NS },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmap-writer" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                       "name": format!("system:serviceaccounts:{CONTROLLED_NS}") }],
    });
    apply_object(&client, &role).await?;
    apply_object(&client, &binding).await
}

/// Waits until `member`'s controlled ConfigMap holds `member: <its name>`, as read by its admin.
async fn configmap_converged(member: &Cluster) -> anyhow::Result<()> {
    let configmaps = Api::<ConfigMap>::namespaced(member.admin_client()?, CONTROLLED_NS);
    let what = format!("{}'s ConfigMap holds its name", member.name());
    eventually(&what, DEADLINE, || async {
        let data = configmaps
            .get_opt("tether-example")
            .await?
            .and_then(|cm| cm.data);
        let value = data.as_ref().and_then(|d| d.get("member")).cloned();
        match value.as_deref() == Some(member.name()) {
            true => Ok(()),
            false => Err(anyhow::anyhow!("data {data:?}")),
        }
    })
    .await
}

#[tokio::test]
async fn multicluster_controller_reconciles_through_rotation_and_revocation() -> anyhow::Result<()>
{
    tokio::time::timeout(TEST_DEADLINE, async {
        let (env, karmada) = karmada_environment(2).await?;
        let mut old_tokens = Vec::new();
        for member in env.members() {
            member.create_namespace_named(CONTROLLED_NS).await?;
            for account in ["agent-a", "agent-b"] {
                member
                    .create_service_account(CONTROLLED_NS, account)
                    .await?;
            }
            grant_configmap_writes(member).await?;
            let token = member.mint_token(CONTROLLED_NS, "agent-a", HOUR).await?;
            karmada.register(&PushMember::of(member, &token)).await?;
            old_tokens.push(token);
        }
        let dir = tempfile::tempdir()?;
        let kubeconfig = control_plane_kubeconfig(env.control_plane(), &dir)?;
        let env_vars = [("NAMESPACE", CONTROLLED_NS)];
        let mut example = MULTICLUSTER_CONTROLLER.start(&kubeconfig, &env_vars)?;
        saw_all(
            &mut example,
            &[
                "reconciled member1/team-a/tether-example",
                "reconciled member2/team-a/tether-example",
            ],
        )
        .await?;
        for member in env.members() {
            configmap_converged(member).await?;
        }

        // Every member's Secret gets agent-b's token, then agent-a is revoked.
        for member in env.members() {
            let token = member.mint_token(CONTROLLED_NS, "agent-b", HOUR).await?;
            karmada
                .write_secret(member.name(), &token, member.ca_pem())
                .await?;
        }
        saw_all(&mut example, &["rotated member1", "rotated member2"]).await?;
        let (member1, member2) = (env.cluster(1), env.cluster(2));
        tokio::try_join!(
            member1.revoke(CONTROLLED_NS, "agent-a", &old_tokens[0]),
            member2.revoke(CONTROLLED_NS, "agent-a", &old_tokens[1]),
        )?;

        // Drift that only a watch shows: member1's ConfigMap changed, member2's deleted. The
        // repairs are writes that only agent-b's token can make now.
        let configmaps = Api::<ConfigMap>::namespaced(member1.admin_client()?, CONTROLLED_NS);
        let drift = json!({ "data": { "member": "someone-else" } });
        configmaps
            .patch(
                "tether-example",
                &PatchParams::default(),
                &Patch::Merge(&drift),
            )
            .await?;
        Api::<ConfigMap>::namespaced(member2.admin_client()?, CONTROLLED_NS)
            .delete("tether-example", &DeleteParams::default())
            .await?;
        for member in env.members() {
            configmap_converged(member).await?;
        }

        // member2 leaves the fleet: its controller stops.
        let clusters = Api::<KarmadaCluster>::all(karmada.client().clone());
        clusters.delete("member2", &DeleteParams::default()).await?;
        saw_all(&mut example, &["stopped member2"]).await?;

        let printed = stop_cleanly(example).await?;
        for member in ["member1", "member2"] {
            let started = lines_starting(&printed, &format!("started {member}"));
            ensure!(
                started == 1,
                "{member}'s controller started once, not restarted: {started}"
            );
        }
        ensure!(
            lines_starting(&printed, "reconcile failed") == 0,
            "no reconcile failed"
        );
        let last = &printed[printed.len() - 1];
        ensure!(
            last.starts_with("reconciles: ") && last.ends_with(" ok, 0 failed"),
            "{last}"
        );
        ensure!(
            count_before(last, " ok,")? >= 4,
            "two members, each reconciled before and after: {last}"
        );
        anyhow::Ok(())
    })
    .await
    .context("the test outlived its deadline")?
}
