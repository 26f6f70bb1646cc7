//! The anchors: the same members, the same apiserver, the same run, with other systems'
//! member clients beside Tether's, each as a process of its own ([`System`]).
//!
//! On a subset of members that share one member apiserver, every system runs a client per
//! member with what a controller runs: a Deployment and a Node watch and a request every
//! `probe_period` (a `SelfSubjectReview`, whose answer names the ServiceAccount the token
//! belongs to, so each request shows which token it carried). Each reports [`Observation`]s on
//! its stdout. Then:
//! 1. steady state for `window`: Secret reads per second, and RSS per member;
//! 2. rotation: each member's Secret gets a token of a new ServiceAccount and the old
//!    ServiceAccount is deleted (as in the mass rotation); per member, the time from the write's
//!    acknowledgement to the first request that carried the new token; the 401s from then on
//!    and the last of them; the lists of watched collections until every system that re-reads
//!    tokens has switched (or `limit`);
//! 3. one forced reconnect: the apiserver restarts, a Deployment's status changes, and
//!    `blind_after` later the members whose watch has not seen the change are counted as blind.

pub mod child;
pub mod fleet_file;
pub mod observation;
pub mod rust_anchor;
pub mod system;

use std::{
    collections::BTreeMap,
    sync::atomic::Ordering,
    time::{Duration, Instant, SystemTime},
};

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, api::PostParams};
use testkit::RestartOptions;

use crate::scale::{
    fleet::{Fleet, Member, SECRET_NAMESPACE},
    percentiles::Percentiles,
};
use child::BaselineProcess;
use fleet_file::{Endpoint, FleetFile, FleetMember};
use observation::MemberRecord;
pub use system::{Programs, System};

/// The canary Deployment whose status change the watches must see after the restart.
const CANARY: &str = "canary";

/// Knobs of the baseline run.
#[derive(Clone, Debug)]
pub struct BaselineOptions {
    /// Members in the subset (all on one apiserver).
    pub members: usize,
    /// Period of each client's request.
    pub probe_period: Duration,
    /// Steady-state window for Secret reads.
    pub window: Duration,
    /// How long after the restart blindness is counted.
    pub blind_after: Duration,
    /// Give up waiting for syncs and switches after this long.
    pub limit: Duration,
    /// The baseline programs.
    pub programs: Programs,
}

/// What one system did.
#[derive(Clone, Debug, Default)]
pub struct SystemReport {
    /// Secret reads per second at steady state (Tether: token-cache fetches from the registry's
    /// in-memory store, which cost no API call).
    pub reads_per_second: f64,
    /// Resident set size of its process at steady state, per member.
    pub rss_per_member: u64,
    /// Secret write acknowledged → first request with the new token, per member that switched.
    pub rotation_to_use: Percentiles,
    /// Members whose requests never carried the new token before the bench stopped looking.
    pub never_switched: usize,
    /// 401 responses from the rotation to the restart.
    pub failed_401: u64,
    /// Rotation → the last of those 401s.
    pub last_401_after: Option<Duration>,
    /// Lists of watched collections from the rotation to the restart, per member.
    pub relists_per_member: f64,
    /// Members whose watch had not seen the post-restart change `blind_after` later.
    pub blind: usize,
    /// Output lines it could not use (0 unless a program is broken).
    pub malformed: u64,
}

/// What the baseline run measured.
#[derive(Clone, Debug)]
pub struct BaselineReport {
    /// Members in the subset.
    pub members: usize,
    /// The options it ran with.
    pub options: BaselineOptions,
    /// Per system.
    pub systems: BTreeMap<System, SystemReport>,
    /// Rotation start → every old token rejected.
    pub revoked_after: Duration,
    /// Where the baseline processes' stderr is.
    pub log_dir: std::path::PathBuf,
}

/// Runs the baselines on the first `options.members` members served by `member1`'s apiserver
/// (so that one restart reconnects them all).
///
/// # Errors
/// API errors, a baseline process not starting or exiting, or syncs and revocations not done
/// within `options.limit`.
pub async fn run(fleet: &mut Fleet, options: &BaselineOptions) -> anyhow::Result<BaselineReport> {
    let server_index = fleet.members.first().map_or(0, |m| m.apiserver);
    let subset: Vec<Member> = fleet
        .members
        .iter()
        .filter(|m| m.apiserver == server_index)
        .take(options.members)
        .cloned()
        .collect();
    anyhow::ensure!(!subset.is_empty(), "no members for the baselines");
    let server = &fleet.apiservers[server_index];
    let namespace = server.namespace.clone();
    let admin = server.admin.clone();

    // The canary, ready=1.
    let canary = testkit::deployment(&namespace, CANARY, 3);
    Api::<Deployment>::namespaced(admin.clone(), &namespace)
        .create(&PostParams::default(), &canary)
        .await
        .context("creating the canary Deployment")?;
    testkit::set_deployment_status(&admin, &namespace, CANARY, 1).await?;

    // Kept after the run: the processes' stderr. The fleet file (it holds the control plane's
    // admin token) is a `NamedTempFile`: owner-only, removed when the run ends, however it ends.
    let dir = tempfile::Builder::new()
        .prefix("tether-baselines-")
        .tempdir()?
        .keep();
    let control_plane = fleet.env.control_plane();
    let fleet_file = tempfile::Builder::new()
        .prefix("fleet")
        .suffix(".json")
        .tempfile_in(&dir)?;
    let contents = FleetFile {
        control_plane: Endpoint {
            server: control_plane.endpoint().to_owned(),
            ca_pem: control_plane.ca_pem().to_owned(),
            token: control_plane.admin_token()?,
        },
        secret_namespace: SECRET_NAMESPACE.to_owned(),
        namespace: namespace.clone(),
        canary: CANARY.to_owned(),
        probe_period_millis: u64::try_from(options.probe_period.as_millis())?,
        members: subset
            .iter()
            .map(|m| FleetMember {
                name: m.name.clone(),
                server: server.endpoint.clone(),
                ca_pem: server.ca_pem.clone(),
            })
            .collect(),
    };
    serde_json::to_writer(fleet_file.as_file(), &contents)?;
    let mut processes = System::ALL
        .iter()
        .map(|system| {
            BaselineProcess::spawn(
                *system,
                &options.programs,
                fleet_file.path(),
                subset.iter().map(|m| m.name.as_str()),
                &dir,
            )
        })
        .collect::<anyhow::Result<Vec<_>>>()?;

    // Every member of every system synced and sees the canary.
    let deadline = Instant::now() + options.limit;
    loop {
        let waiting: Vec<&str> = processes
            .iter()
            .filter(|p| {
                p.ledger
                    .snapshot()
                    .values()
                    .any(|r| !r.synced || r.canary != Some(1))
            })
            .map(|p| p.system.label())
            .collect();
        if waiting.is_empty() {
            break;
        }
        for process in &mut processes {
            process.sample().with_context(|| logs_at(&dir))?;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "not every member synced within {:?}: {waiting:?} ({})",
            options.limit,
            logs_at(&dir)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // 1. Steady state.
    let reads = |processes: &[BaselineProcess]| -> Vec<u64> {
        processes
            .iter()
            .map(|p| total(&p.ledger.snapshot(), |r| r.secret_reads))
            .collect()
    };
    let before = reads(&processes);
    let started = Instant::now();
    tokio::time::sleep(options.window).await;
    let after = reads(&processes);
    let seconds = started.elapsed().as_secs_f64();
    let mut reports = Vec::with_capacity(processes.len());
    for (i, process) in processes.iter_mut().enumerate() {
        let rss = process.sample().with_context(|| logs_at(&dir))?.rss_bytes;
        reports.push(SystemReport {
            reads_per_second: after[i].saturating_sub(before[i]) as f64 / seconds,
            rss_per_member: rss / u64::try_from(subset.len())?,
            ..SystemReport::default()
        });
    }

    // 2. Rotation: new ServiceAccounts, tokens, Secrets; old ServiceAccounts deleted.
    let generation = fleet.mint_next_generation(&subset).await?;
    let at_rotation: Vec<BTreeMap<String, MemberRecord>> =
        processes.iter().map(|p| p.ledger.snapshot()).collect();
    let rotation = Instant::now();
    let rotation_wall = SystemTime::now();
    let acks = fleet.write_tokens(&subset, &generation.tokens).await?;
    let acked: BTreeMap<&str, SystemTime> =
        subset.iter().map(|m| m.name.as_str()).zip(acks).collect();
    fleet.revoke(&subset, rotation + options.limit).await?;
    let revoked_after = rotation.elapsed();
    let new_user = |m: &Member| {
        format!(
            "system:serviceaccount:{namespace}:{}",
            m.service_account(generation.next)
        )
    };
    let switched = |records: &BTreeMap<String, MemberRecord>, m: &Member| {
        records
            .get(&m.name)
            .is_some_and(|r| r.users.contains_key(&new_user(m)))
    };
    // Until every system that re-reads tokens has switched, or the limit.
    while processes.iter().any(|p| {
        let records = p.ledger.snapshot();
        !p.system.bakes_in() && subset.iter().any(|m| !switched(&records, m))
    }) && rotation.elapsed() < options.limit
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // At least two more requests per client after the revocation.
    tokio::time::sleep(options.probe_period * 2).await;
    for ((process, report), before) in processes.iter().zip(&mut reports).zip(&at_rotation) {
        let records = process.ledger.snapshot();
        report.rotation_to_use = Percentiles::of(subset.iter().filter_map(|m| {
            let used = *records.get(&m.name)?.users.get(&new_user(m))?;
            Some(
                used.duration_since(acked[m.name.as_str()])
                    .unwrap_or_default(),
            )
        }));
        report.never_switched = subset.iter().filter(|m| !switched(&records, m)).count();
        report.failed_401 = total(&records, |r| r.unauthorized) - total(before, |r| r.unauthorized);
        report.last_401_after = records
            .values()
            .filter_map(|r| r.last_unauthorized)
            .max()
            .and_then(|last| last.duration_since(rotation_wall).ok());
        report.relists_per_member = (total(&records, |r| r.lists) - total(before, |r| r.lists))
            as f64
            / subset.len() as f64;
    }

    // 3. One forced reconnect, then a change every watch should see.
    let env_index = fleet.apiservers[server_index].env_index;
    let restart = fleet.env.restart(env_index, RestartOptions::default());
    restart.await.context("restarting the member apiserver")?;
    let admin = fleet.env.cluster(env_index).admin_client()?;
    let changed = Instant::now();
    loop {
        match testkit::set_deployment_status(&admin, &namespace, CANARY, 3).await {
            Ok(_) => break,
            Err(err) if changed.elapsed() < options.limit => {
                tracing::debug!(error = %err, "canary update failed; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(err) => return Err(err),
        }
    }
    tokio::time::sleep(options.blind_after).await;
    let mut systems = BTreeMap::new();
    for (process, mut report) in processes.iter().zip(reports) {
        let records = process.ledger.snapshot();
        report.blind = records.values().filter(|r| r.canary != Some(3)).count();
        report.malformed = process.ledger.malformed.load(Ordering::Relaxed);
        systems.insert(process.system, report);
    }
    drop(processes);

    fleet.adopt(generation);
    Ok(BaselineReport {
        members: subset.len(),
        options: options.clone(),
        systems,
        revoked_after,
        log_dir: dir,
    })
}

fn total(records: &BTreeMap<String, MemberRecord>, count: impl Fn(&MemberRecord) -> u64) -> u64 {
    records.values().map(count).sum()
}

fn logs_at(dir: &std::path::Path) -> String {
    format!("the baselines' stderr is in {}", dir.display())
}
