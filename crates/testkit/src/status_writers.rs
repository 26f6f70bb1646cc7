//! [`StatusWriters`]: who wrote each Karmada `Cluster`'s status, checked against the shard
//! claims that came before.
//!
//! A sharded collector writes its claim into the status it writes (condition
//! `TetherShardOwner`, message `<identity>/<generation>/<epoch>`; a takeover writes the next
//! epoch) as the field manager `tether-collector.<identity>`. This watch sees every change of
//! every `Cluster` (a watch delivers each `resourceVersion`). For each status write it reads
//! the writer from `managedFields` and the claim from the condition. A double write is one by a
//! replica that did not hold the claim it wrote (another manager), or one whose epoch went
//! back, or that changed owner without a new epoch: a replica writing over a newer claim, which
//! fencing must refuse.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use kube::{Api, Client, api::DynamicObject};

use crate::folded_watch::FoldedWatch;
use crate::karmada::cluster_resource;

/// The condition type of a shard claim.
pub const OWNER_CONDITION: &str = "TetherShardOwner";

/// The prefix of a sharded collector's field manager.
const MANAGER_PREFIX: &str = "tether-collector.";

/// One status write by a replica that did not hold the claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoubleWrite {
    /// The member (`Cluster` name).
    pub member: String,
    /// The replica that wrote.
    pub writer: String,
    /// The claim before the write, `<identity>/<generation>/<epoch>`.
    pub before: String,
    /// The claim the write carried.
    pub claim: String,
}

#[derive(Default)]
struct State {
    /// The last status seen per member, to tell status writes from other changes.
    status: HashMap<String, serde_json::Value>,
    /// The last claim seen per member.
    claims: HashMap<String, String>,
    writes: BTreeMap<String, u64>,
    double: Vec<DoubleWrite>,
    /// The last status write per member: when, and by whom.
    last_write: HashMap<String, (Instant, String)>,
}

/// A running watch; stopped when dropped.
pub struct StatusWriters(FoldedWatch<State>);

impl StatusWriters {
    /// Starts watching every `Cluster` through `client`.
    pub fn start(client: Client) -> Self {
        let api = Api::<DynamicObject>::all_with(client, &cluster_resource());
        Self(FoldedWatch::start(api, observe))
    }

    /// Status writes seen per replica identity.
    pub fn writes(&self) -> BTreeMap<String, u64> {
        self.0.state().writes.clone()
    }

    /// Every status write by a replica that did not hold the claim.
    pub fn double_writes(&self) -> Vec<DoubleWrite> {
        self.0.state().double.clone()
    }

    /// The replica that last wrote `member`'s status, and when (as this watch saw it).
    pub fn last_write(&self, member: &str) -> Option<(Instant, String)> {
        self.0.state().last_write.get(member).cloned()
    }
}

fn observe(state: &mut State, object: &DynamicObject) {
    let Some(name) = object.metadata.name.clone() else {
        return;
    };
    let status = object.data.get("status").cloned().unwrap_or_default();
    let changed = state.status.get(&name) != Some(&status);
    state.status.insert(name.clone(), status);
    if !changed {
        return;
    }
    let Some(writer) = status_writer(object) else {
        return;
    };
    *state.writes.entry(writer.clone()).or_default() += 1;
    state
        .last_write
        .insert(name.clone(), (Instant::now(), writer.clone()));
    let claim = claim_of(object).unwrap_or_default();
    let before = state
        .claims
        .insert(name.clone(), claim.clone())
        .unwrap_or_default();
    if !is_fenced(&before, &claim, &writer) {
        state.double.push(DoubleWrite {
            member: name,
            writer,
            before,
            claim,
        });
    }
}

/// Whether a write by `writer` carrying `claim` over `before` is one fencing allows: the
/// writer's own claim, same owner and epoch, or a takeover with a later epoch.
fn is_fenced(before: &str, claim: &str, writer: &str) -> bool {
    let parse = |claim: &str| -> Option<(String, String, u64)> {
        let (owner, epoch) = claim.rsplit_once('/')?;
        let (identity, _) = owner.split_once('/')?;
        Some((identity.to_owned(), owner.to_owned(), epoch.parse().ok()?))
    };
    let Some((identity, owner, epoch)) = parse(claim) else {
        return false;
    };
    if identity != writer {
        return false;
    }
    match parse(before) {
        None => true,
        Some((_, previous, previous_epoch)) if previous == owner => epoch == previous_epoch,
        Some((_, _, previous_epoch)) => epoch > previous_epoch,
    }
}

/// The claim condition's message, if the status has one.
fn claim_of(object: &DynamicObject) -> Option<String> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == OWNER_CONDITION)?["message"]
        .as_str()
        .map(str::to_owned)
}

/// The sharded replica that owns the status fields, from `managedFields`.
fn status_writer(object: &DynamicObject) -> Option<String> {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|entry| entry.subresource.as_deref() == Some("status"))
        .filter_map(|entry| {
            let replica = entry.manager.as_deref()?.strip_prefix(MANAGER_PREFIX)?;
            Some((entry.time.as_ref().map(|t| t.0), replica))
        })
        // The latest writer; an earlier one keeps an entry only for fields the latest left out.
        .max_by_key(|(time, _)| *time)
        .map(|(_, replica)| replica.to_owned())
}
