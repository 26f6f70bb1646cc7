//! Tether beside the real Karmada: karmada-controller-manager v1.18.2 (its cluster and
//! cluster-status controllers, the pinned tool `hack/tools/karmada-controller-manager`) and the
//! collector as the `beside-karmada` overlay runs it (`--write-status=false`), on one control
//! plane and two push-mode members registered as `karmadactl join` does. One setup serves the
//! three scenarios:
//!
//! 1. Karmada marks both members Ready, and the two never fight over a `Cluster`'s status: every
//!    status write, sampled through the whole run (member apiserver restarts included), is
//!    Karmada's, with Karmada's condition types only.
//! 2. member1's token is rotated in its Secret, the old ServiceAccount token revoked and the
//!    member apiserver restarted (so every watch must reconnect). What each side does is
//!    recorded and asserted; docs/src/operations/beside-karmada.md quotes the numbers. Measured
//!    (two runs, ~141 s each): Tether mirrored the member 3.1-3.4 s after it was back, with no
//!    401 and 0 relists for the rotation (1 for the restart); Karmada kept `Ready=True/ClusterReady`
//!    for the 120 s watched while its Node and Pod informers were refused (first 401 after
//!    3.1-3.4 s, 12-14 log lines in 120 s), and never counted a Node created on member1.
//! 3. Meanwhile a second collector with `--mint-tokens` mints member2's token and writes it into
//!    the Secret: Karmada's member2 informers keep the seeded token, still valid, so Karmada
//!    keeps `Ready` and counts a Node created on member2 after the mint (7.7 s after it).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use cluster_registry::minting::MINT_ANNOTATION;
use e2e::{
    collector_run::temp_dir,
    limits::HOUR,
    manifest::parse_documents,
    manifest_apply::apply_object,
    rotation_plane::{MEMBER_RBAC_YAML, rotation_annotations, rotations},
    scenario::Scenario,
};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, PostParams},
};
use serde_json::json;
use testkit::{
    KarmadaControllerManager, MIN_TOKEN_EXPIRY, RestartOptions, eventually, install_karmada_crds,
};
use tokio::time::Instant;

/// The collector's probe period.
const PROBE: Duration = Duration::from_secs(1);
/// Karmada's first Ready: its cluster-status controller syncs every 10 s (the default).
const KARMADA_START: Duration = Duration::from_secs(60);
/// The collector's start-up and convergence bounds.
const START: Duration = Duration::from_secs(30);
const CONVERGE: Duration = Duration::from_secs(10);
/// How long Karmada is watched after the rotation for what it does about it.
const AFTER_ROTATION: Duration = Duration::from_secs(120);

/// Condition types the collector writes when it writes status (not in this mode).
const TETHER_TYPES: [&str; 2] = ["CredentialsValid", "TetherShardOwner"];

/// What the sampler saw of the `Cluster`s' statuses.
#[derive(Default)]
struct Seen {
    /// Condition types per member.
    types: BTreeMap<String, BTreeSet<String>>,
    /// Field managers of the status subresource per member.
    status_managers: BTreeMap<String, BTreeSet<String>>,
    /// Every distinct `Ready` status/reason per member, with when it was first seen.
    ready: BTreeMap<String, Vec<(Instant, String)>>,
}

/// Reads both `Cluster`s every 250 ms until aborted, into `seen`.
fn sample(api: Api<DynamicObject>, seen: Arc<Mutex<Seen>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Ok(list) = api.list(&Default::default()).await {
                let mut seen = seen.lock().unwrap();
                for cluster in list {
                    let name = cluster.metadata.name.clone().unwrap_or_default();
                    let conditions = cluster.data["status"]["conditions"].as_array().cloned();
                    for c in conditions.unwrap_or_default() {
                        let type_ = c["type"].as_str().unwrap_or_default().to_owned();
                        seen.types.entry(name.clone()).or_default().insert(type_);
                        if c["type"] == "Ready" {
                            let now = format!("{}/{}", c["status"], c["reason"]).replace('"', "");
                            let history = seen.ready.entry(name.clone()).or_default();
                            if history.last().map(|(_, r)| r) != Some(&now) {
                                history.push((Instant::now(), now));
                            }
                        }
                    }
                    let fields = cluster.metadata.managed_fields.unwrap_or_default();
                    for entry in fields {
                        if entry.subresource.as_deref() == Some("status") {
                            let manager = entry.manager.unwrap_or_default();
                            seen.status_managers
                                .entry(name.clone())
                                .or_default()
                                .insert(manager);
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
}

/// Lines of Karmada's log after byte `from` that report a 401 from a member.
fn unauthorized_lines(log: &str, from: usize) -> Vec<String> {
    log.get(from..)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("Unauthorized"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn karmada_and_tether_share_the_clusters_and_only_tether_follows_a_rotation()
-> anyhow::Result<()> {
    let started = Instant::now();
    // The beside-karmada overlay's one collector flag.
    let mut s = Scenario::start_with(2, PROBE, &["--write-status=false"]).await?;
    let crds = install_karmada_crds(s.karmada.client()).await?;
    eprintln!("installed {} Karmada CRDs: {crds:?}", crds.len());
    // 3's setup: member2's Secret holds a 600 s token of the shipped rotation ServiceAccount
    // (tether-member/tether, which may mint its own tokens, and reads as the harness reader),
    // and its Cluster asks Tether to rotate it. Karmada's member2 informers start with it.
    let member2 = s.member(2).clone();
    member2.create_namespace_named("tether-member").await?;
    member2
        .create_service_account("tether-member", "tether")
        .await?;
    let admin2 = member2.admin_client()?;
    for object in parse_documents(MEMBER_RBAC_YAML, "token-rotation.yaml")? {
        apply_object(&admin2, &object).await?;
    }
    let seeded = member2
        .mint_token("tether-member", "tether", MIN_TOKEN_EXPIRY)
        .await?;
    s.karmada
        .write_secret("member2", &seeded, member2.ca_pem())
        .await?;
    let annotations = rotation_annotations("tether-member/tether", &[(MINT_ANNOTATION, "true")]);
    for (key, value) in &annotations {
        s.karmada.annotate("member2", key, value).await?;
    }
    let dir = temp_dir("karmada")?;
    let mut kcm = KarmadaControllerManager::start(s.env.control_plane(), &dir, &[])?;
    eprintln!(
        "karmada-controller-manager logs to {}",
        kcm.log_path().display()
    );

    let resource = ApiResource {
        group: "cluster.karmada.io".to_owned(),
        version: "v1alpha1".to_owned(),
        api_version: "cluster.karmada.io/v1alpha1".to_owned(),
        kind: "Cluster".to_owned(),
        plural: "clusters".to_owned(),
    };
    let clusters = Api::<DynamicObject>::all_with(s.karmada.client().clone(), &resource);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let sampler = sample(clusters, seen.clone());

    // 1. Karmada marks both members Ready; Tether follows them without writing status.
    s.create_deployment(1, "web", 1).await?;
    for member in ["member1", "member2"] {
        let took = s
            .wait(member, "Ready=True/ClusterReady", KARMADA_START)
            .await;
        kcm.ensure_running()?;
        let took = took.map_err(|e| e.context(kcm.log_tail(30)))?;
        eprintln!("Karmada: {member} Ready=True/ClusterReady after {took:?}");
        s.collector.wait_member_ready(member, START).await?;
    }
    s.wait_mirrored("member1", "web", 1, START).await?;
    // member2's apiserver restarts: both sides reconnect, neither writes over the other.
    s.env.restart(2, RestartOptions::default()).await?;
    s.collector.wait_member_ready("member2", START).await?;

    // 2. Rotation: member1's Secret gets agent-b's token, agent-a's is revoked, and member1's
    // apiserver restarts so that every watch must reconnect with what its client holds.
    let (member, ns) = (s.member(1).clone(), s.namespace.clone());
    let old_token = s.registered_tokens[0].clone();
    let relists_before = s.metric("tether_relists_total", "member1").await?;
    let log_mark = kcm.log()?.len();
    let new_token = member.mint_token(&ns, "agent-b", HOUR).await?;
    s.karmada
        .write_secret("member1", &new_token, member.ca_pem())
        .await?;
    let rotated = Instant::now();
    member.revoke(&ns, "agent-a", &old_token).await?;
    let relists_rotation = s.metric("tether_relists_total", "member1").await? - relists_before;
    s.env.restart(1, RestartOptions::default()).await?;
    let restarted = Instant::now();
    eprintln!(
        "rotation at +{:?}, member1 back at +{:?}",
        rotated - started,
        restarted - started
    );

    // Tether keeps following: the new status is mirrored, no watch was refused, the credential
    // stays valid.
    s.set_ready(1, "web", 3).await?;
    let took = s.wait_mirrored("member1", "web", 3, CONVERGE).await?;
    eprintln!("Tether mirrored the post-rotation status {took:?} after member1 was back");
    let refused = s
        .collector
        .metric("tether_watch_errors_total", r#"kind="unauthorized""#);
    assert_eq!(refused.await?, 0.0, "no Tether watch was refused");
    let unauthorized = s.metric("tether_unauthorized_responses_total", "member1");
    assert_eq!(
        unauthorized.await?,
        0.0,
        "member1 never answered Tether 401"
    );
    let valid = r#"member="member1",state="valid""#;
    eventually(
        "Tether: member1's credential is valid",
        CONVERGE,
        || async {
            let state = s.collector.metric("tether_credential_state", valid).await;
            matches!(state, Ok(v) if v == 1.0)
        },
    )
    .await?;
    let relists_restart = s.metric("tether_relists_total", "member1").await? - relists_before;
    eprintln!(
        "Tether's member1 relists: {relists_rotation} for the rotation, {relists_restart} with the restart too"
    );
    assert_eq!(relists_rotation, 0.0, "the rotation alone rebuilds nothing");

    // Karmada: its member informers relist with the token they were built with.
    let first_refusal = eventually("Karmada's informers get a 401", CONVERGE * 3, || async {
        let log = kcm.log()?;
        anyhow::ensure!(!unauthorized_lines(&log, log_mark).is_empty(), "no 401 yet");
        anyhow::Ok(restarted.elapsed())
    })
    .await?;
    eprintln!("Karmada's first 401 {first_refusal:?} after member1 was back");
    // 3. A second collector mints for member2 (the first one does not mint): a token at 1 %
    // of its 600 s, written into the Secret Karmada reads.
    let minting = s
        .start_collector(&[
            "--write-status=false",
            "--mint-tokens",
            "--mint-at-fraction",
            "0.01",
            "--mint-retry-seconds",
            "2",
            "--request-timeout",
            "3",
        ])
        .await?;
    let minted = eventually("Tether mints for member2", KARMADA_START, || async {
        let done = rotations(&minting, "member2", "success").await;
        anyhow::ensure!(done >= 1.0, "{done} mints");
        let now = s.karmada.secret_token("member2").await?;
        anyhow::ensure!(now != seeded, "the Secret still holds the seeded token");
        anyhow::Ok(restarted.elapsed())
    })
    .await?;
    eprintln!("Tether minted member2's token {minted:?} after member1 was back");
    // A Node appears on both members after Tether's mint; Karmada counts member2's (its
    // informers hold the seeded token, still valid), never member1's (revoked).
    for i in [1, 2] {
        let node: Node = serde_json::from_value(json!({ "metadata": { "name": "late" } }))?;
        Api::<Node>::all(s.member(i).admin_client()?)
            .create(&PostParams::default(), &node)
            .await?;
    }
    let counted = eventually("Karmada counts member2's Node", KARMADA_START, || async {
        let total = s.karmada.status("member2").await?["nodeSummary"]["totalNum"].as_i64();
        anyhow::ensure!(total == Some(1), "nodeSummary.totalNum {total:?}");
        anyhow::Ok(restarted.elapsed())
    })
    .await?;
    eprintln!("Karmada counted member2's Node {counted:?} after member1 was back");

    tokio::time::sleep(AFTER_ROTATION.saturating_sub(rotated.elapsed())).await;
    kcm.ensure_running()?;
    let watched = rotated.elapsed();
    let log = kcm.log()?;
    let refused = unauthorized_lines(&log, log_mark);
    eprintln!(
        "Karmada: {} lines with Unauthorized in {watched:?}",
        refused.len()
    );
    let stale = s.karmada.status("member1").await?["nodeSummary"]["totalNum"].as_i64();
    eprintln!("Karmada's nodeSummary.totalNum of member1 after {watched:?}: {stale:?}");
    let ready = s.karmada.condition("member1", "Ready").await?;
    sampler.abort();

    let seen = seen.lock().unwrap();
    for (member, history) in &seen.ready {
        let at = |t: &Instant| t.saturating_duration_since(started);
        let history: Vec<_> = history.iter().map(|(t, r)| (r.as_str(), at(t))).collect();
        eprintln!("Karmada's Ready on {member}: {history:?}");
    }
    eprintln!("condition types: {:?}", seen.types);
    eprintln!("status managers: {:?}", seen.status_managers);
    eprintln!("suite took {:?}", started.elapsed());

    // 1, through both restarts and the rotation: Karmada alone writes status, its types only.
    let karmada_types = BTreeSet::from(["CompleteAPIEnablements".to_owned(), "Ready".to_owned()]);
    let karmada_manager = BTreeSet::from(["karmada-controller-manager".to_owned()]);
    for name in ["member1", "member2"] {
        assert_eq!(seen.types.get(name), Some(&karmada_types), "{name}");
        assert_eq!(
            seen.status_managers.get(name),
            Some(&karmada_manager),
            "{name}"
        );
        assert!(TETHER_TYPES.iter().all(|t| !seen.types[name].contains(*t)));
        // Karmada's Ready never left True/ClusterReady, restarts included.
        let history: Vec<_> = seen.ready[name].iter().map(|(_, r)| r.as_str()).collect();
        assert_eq!(history, ["True/ClusterReady"], "{name}");
    }
    // 2. Karmada v1.18.2: Ready follows the Secret (its health check builds a client from the
    // Secret on every sync), but the member informers keep the revoked token: they are refused
    // for as long as we watch, and the status they feed goes stale without a word.
    assert_eq!(ready, Some(("True".to_owned(), "ClusterReady".to_owned())));
    assert!(
        refused.len() >= 3,
        "Karmada's informers kept retrying: {refused:?}"
    );
    assert!(
        refused
            .iter()
            .all(|l| l.contains("*v1.Node") || l.contains("*v1.Pod")),
        "{refused:?}"
    );
    assert_ne!(stale, Some(1), "Karmada never counts member1's new Node");
    Ok(())
}
