//! What a baseline process reports, one JSON object a line on its stdout, and the ledger the
//! bench keeps of it per member. The Go anchors (`anchors/client-go-anchor`) and the Rust one
//! (`rust-anchor`) speak the same lines, so every system is measured by the same code.

use std::{
    collections::BTreeMap,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use serde::{Deserialize, Serialize};

/// One line of a baseline's output: what happened to which member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// The member.
    pub member: String,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
}

/// What a baseline saw happen to a member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "event",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    /// The member's clients are built and every informer has synced once.
    Synced,
    /// A `SelfSubjectReview` answered with a user other than the previous answer's.
    User {
        /// The user it named.
        user: String,
        /// When the review was sent, Unix ms.
        sent_ms: u64,
    },
    /// A response (request, list or watch) was 401.
    Unauthorized {
        /// When, Unix ms.
        at_ms: u64,
    },
    /// A watched collection was listed.
    List {
        /// `deployments` or `nodes`.
        resource: String,
    },
    /// The member's Secret was read (Tether: a token-cache fetch from its in-memory store).
    SecretRead,
    /// The informer's copy of the canary Deployment has this many ready replicas.
    Canary {
        /// Its ready replicas.
        ready: i32,
    },
}

/// Unix milliseconds of `at`.
pub fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn from_unix_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

/// What one member's clients showed so far.
#[derive(Clone, Debug, Default)]
pub struct MemberRecord {
    /// Synced at least once.
    pub synced: bool,
    /// Each user its reviews answered with, and when the first such review was sent. Bounded by
    /// the credential generations of a run.
    pub users: BTreeMap<String, SystemTime>,
    /// 401 responses.
    pub unauthorized: u64,
    /// When the last 401 came.
    pub last_unauthorized: Option<SystemTime>,
    /// Lists of watched collections.
    pub lists: u64,
    /// Secret reads.
    pub secret_reads: u64,
    /// The canary's ready replicas as last seen.
    pub canary: Option<i32>,
}

/// Every member's record, fed by a baseline's output.
#[derive(Debug, Default)]
pub struct Ledger {
    members: Mutex<BTreeMap<String, MemberRecord>>,
    /// Lines that were not observations (or named a member the bench did not give).
    pub malformed: AtomicU64,
}

impl Ledger {
    /// A ledger of `members`, none synced.
    pub fn new<'a>(members: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            members: Mutex::new(
                members
                    .into_iter()
                    .map(|m| (m.to_owned(), MemberRecord::default()))
                    .collect(),
            ),
            malformed: AtomicU64::new(0),
        }
    }

    /// Applies one output line.
    pub fn apply_line(&self, line: &str) {
        match serde_json::from_str::<Observation>(line) {
            Ok(observation) if self.apply(&observation) => {}
            _ => {
                self.malformed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Applies `observation`; false if it names a member the ledger does not hold.
    pub fn apply(&self, observation: &Observation) -> bool {
        let mut members = self.members.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(record) = members.get_mut(&observation.member) else {
            return false;
        };
        match &observation.event {
            Event::Synced => record.synced = true,
            Event::User { user, sent_ms } => {
                record
                    .users
                    .entry(user.clone())
                    .or_insert_with(|| from_unix_ms(*sent_ms));
            }
            Event::Unauthorized { at_ms } => {
                record.unauthorized += 1;
                record.last_unauthorized = Some(from_unix_ms(*at_ms));
            }
            Event::List { .. } => record.lists += 1,
            Event::SecretRead => record.secret_reads += 1,
            Event::Canary { ready } => record.canary = Some(*ready),
        }
        true
    }

    /// A copy of every member's record.
    pub fn snapshot(&self) -> BTreeMap<String, MemberRecord> {
        self.members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn reads_the_lines_the_go_anchor_writes() {
        let ledger = Ledger::new(["member1"]);
        for line in [
            r#"{"member":"member1","event":"synced"}"#,
            r#"{"member":"member1","event":"user","user":"u0","sentMs":1000}"#,
            r#"{"member":"member1","event":"user","user":"u1","sentMs":3000}"#,
            r#"{"member":"member1","event":"user","user":"u1","sentMs":9000}"#,
            r#"{"member":"member1","event":"unauthorized","atMs":2000}"#,
            r#"{"member":"member1","event":"list","resource":"nodes"}"#,
            r#"{"member":"member1","event":"secretRead"}"#,
            r#"{"member":"member1","event":"canary","ready":3}"#,
        ] {
            ledger.apply_line(line);
        }
        let record = ledger.snapshot().remove("member1").unwrap();
        assert!(record.synced);
        assert_eq!(record.users["u1"], from_unix_ms(3000), "the first review");
        assert_eq!(record.users.len(), 2);
        assert_eq!(record.unauthorized, 1);
        assert_eq!(record.last_unauthorized, Some(from_unix_ms(2000)));
        assert_eq!((record.lists, record.secret_reads), (1, 1));
        assert_eq!(record.canary, Some(3));
        assert_eq!(ledger.malformed.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn counts_lines_it_cannot_use_and_ignores_them() {
        let ledger = Ledger::new(["member1"]);
        ledger.apply_line("not json");
        ledger.apply_line(r#"{"member":"member9","event":"synced"}"#);
        ledger.apply_line(r#"{"member":"member1","event":"reboot"}"#);
        assert_eq!(ledger.malformed.load(Ordering::Relaxed), 3);
        assert!(!ledger.snapshot()["member1"].synced);
    }

    #[test]
    fn writes_what_it_reads() {
        let observation = Observation {
            member: "m".to_owned(),
            event: Event::User {
                user: "u".to_owned(),
                sent_ms: 5,
            },
        };
        let line = serde_json::to_string(&observation).unwrap();
        assert_eq!(
            line,
            r#"{"member":"m","event":"user","user":"u","sentMs":5}"#
        );
        assert_eq!(
            serde_json::from_str::<Observation>(&line).unwrap(),
            observation
        );
    }
}
