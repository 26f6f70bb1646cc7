//! The scrape-time collector: families read from the handles that count (token caches, each
//! member's credential health) and from what [`Metrics`](super::Metrics) recorded, described
//! as tables and encoded by one loop.

use std::{
    collections::BTreeMap,
    fmt,
    sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard},
};

use member_client::{
    CredentialCache, CredentialHealth, CredentialKind, CredentialState, FailureKind,
};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric as _, MetricEncoder},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
};

/// Every value of the `state` label of `tether_credential_state`, in output order.
const CREDENTIAL_STATES: [&str; 4] = ["unknown", "valid", "unauthorized", "unavailable"];

/// What a member has that no handle counts for us, plus the handle that counts the rest.
#[derive(Debug, Default)]
pub(super) struct MemberEntry {
    /// `None` for a member that only has recorded samples (its informers started before
    /// `watch_member`); such a member is not counted in `tether_members`.
    pub(super) health: Option<CredentialHealth>,
    pub(super) ready: Option<bool>,
    pub(super) relists: BTreeMap<String, u64>,
    pub(super) watch_errors: BTreeMap<(String, &'static str), u64>,
    pub(super) token_mints: BTreeMap<&'static str, u64>,
}

/// The credential caches watched, by name.
type Caches = BTreeMap<String, CredentialCache>;
/// What each member reported, by name.
type Members = BTreeMap<String, MemberEntry>;

/// The scrape-time collector. `BTreeMap`s so that samples come out sorted by label.
#[derive(Debug, Default)]
pub(super) struct Watched {
    credential_caches: RwLock<Caches>,
    members: RwLock<Members>,
    /// `None` until leadership is first known: a collector that writes no status has no
    /// leader, and exporting 0 for it would page `TetherNoLeader` on every such deployment.
    leader: RwLock<Option<bool>>,
}

/// Label pairs of one sample.
type Labels<'a> = Vec<(&'static str, &'a str)>;

/// One family as a table: its name, help, type and samples.
struct Family<'a> {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    samples: Vec<(Labels<'a>, u64)>,
}

impl Family<'_> {
    fn encode(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let mut family = encoder.encode_descriptor(self.name, self.help, None, self.kind)?;
        if let [(labels, value)] = self.samples.as_slice()
            && labels.is_empty()
        {
            // A family without labels has one sample, written as `name value`.
            return self.encode_value(*value, family);
        }
        for (labels, value) in &self.samples {
            self.encode_value(*value, family.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn encode_value(&self, value: u64, metric: MetricEncoder<'_>) -> fmt::Result {
        match self.kind {
            MetricType::Counter => ConstCounter::new(value).encode(metric),
            _ => ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX)).encode(metric),
        }
    }
}

/// `lock` read. The metrics' locks hold plain counters and handles, and every writer leaves
/// them consistent before it could panic, so a poisoned lock is recovered rather than failing
/// every later scrape.
pub(super) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// `lock` written, recovered from poisoning as [`read`] says.
pub(super) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl Watched {
    pub(super) fn credential_caches(&self) -> RwLockReadGuard<'_, Caches> {
        read(&self.credential_caches)
    }

    pub(super) fn credential_caches_mut(&self) -> RwLockWriteGuard<'_, Caches> {
        write(&self.credential_caches)
    }

    pub(super) fn members(&self) -> RwLockReadGuard<'_, Members> {
        read(&self.members)
    }

    pub(super) fn members_mut(&self) -> RwLockWriteGuard<'_, Members> {
        write(&self.members)
    }

    pub(super) fn set_leader(&self, leader: bool) {
        *write(&self.leader) = Some(leader);
    }

    fn leader(&self) -> Option<bool> {
        *read(&self.leader)
    }
}

/// `tether_leader`: its descriptor always, its one sample once leadership is known.
fn leader_family(leader: Option<bool>) -> Family<'static> {
    Family {
        name: "leader",
        help: "1 while this replica is the single writer of Cluster status, published \
               ClusterProfiles and minted tokens: it holds the leader-election Lease, or \
               writes status or ClusterProfiles without --leader-elect; 0 while it waits for \
               the Lease. No sample while it writes none of them, nor with --shards auto, \
               where each replica writes for its own members.",
        kind: MetricType::Gauge,
        samples: leader
            .map(|leader| (Vec::new(), u64::from(leader)))
            .into_iter()
            .collect(),
    }
}

fn credential_cache_families<'a>(caches: &'a BTreeMap<String, CredentialCache>) -> Vec<Family<'a>> {
    let stats: Vec<_> = caches
        .iter()
        .map(|(name, cache)| (name.as_str(), cache.stats()))
        .collect();
    let counter = |name, help, value: fn(&member_client::CredentialCacheStats) -> u64| Family {
        name,
        help,
        kind: MetricType::Counter,
        samples: stats
            .iter()
            .map(|(cache, s)| (vec![("cache", *cache)], value(s)))
            .collect(),
    };
    let fetches_by_kind = stats
        .iter()
        .flat_map(|(cache, s)| {
            CredentialKind::ALL
                .iter()
                .zip(s.fetches_by_kind)
                .map(|(kind, value)| (vec![("cache", *cache), ("kind", kind.as_str())], value))
        })
        .collect();
    vec![
        Family {
            name: "token_fetches",
            help: "Credentials read from their source, by cache (members: the members' \
                   Secrets, files and exec plugins, and the control plane's TokenRequests for \
                   federated members; self: the collector's own token file) and by the kind \
                   read: token, exec, certificate or federated.",
            kind: MetricType::Counter,
            samples: fetches_by_kind,
        },
        counter(
            "token_fetch_failures",
            "Reads of a credential source that gave no usable credential.",
            |s| {
                s.fetches
                    .saturating_sub(s.fetches_by_kind.iter().sum::<u64>())
            },
        ),
        counter(
            "credential_cache_hits",
            "Credential reads answered from the cache (tokens, certificates and exec output \
             alike).",
            |s| s.hits,
        ),
        counter(
            "credential_cache_misses",
            "Credential reads that found no valid entry in the cache, and so read its source.",
            |s| s.misses,
        ),
        counter(
            "token_invalidations",
            "Cached credentials dropped because their source changed or a 401 rejected them.",
            |s| s.invalidations,
        ),
    ]
}

fn member_families<'a>(members: &'a BTreeMap<String, MemberEntry>) -> Vec<Family<'a>> {
    let watched: Vec<(&str, &CredentialHealth)> = members
        .iter()
        .filter_map(|(name, entry)| Some((name.as_str(), entry.health.as_ref()?)))
        .collect();
    let per_watched = |value: fn(&CredentialHealth) -> u64| -> Vec<(Labels<'a>, u64)> {
        watched
            .iter()
            .map(|(member, health)| (vec![("member", *member)], value(health)))
            .collect()
    };
    let credential_state = watched
        .iter()
        .flat_map(|(member, health)| {
            let current = credential_state_label(&health.current());
            CREDENTIAL_STATES.map(|state| {
                let labels = vec![("member", *member), ("state", state)];
                (labels, u64::from(state == current))
            })
        })
        .collect();
    let ready = members
        .iter()
        .filter_map(|(member, entry)| {
            Some((vec![("member", member.as_str())], u64::from(entry.ready?)))
        })
        .collect();
    let relists = members
        .iter()
        .flat_map(|(member, entry)| {
            entry.relists.iter().map(move |(resource, value)| {
                (
                    vec![("member", member.as_str()), ("resource", resource.as_str())],
                    *value,
                )
            })
        })
        .collect();
    let watch_errors = members
        .iter()
        .flat_map(|(member, entry)| {
            entry
                .watch_errors
                .iter()
                .map(move |((resource, kind), value)| {
                    let labels = vec![
                        ("member", member.as_str()),
                        ("resource", resource.as_str()),
                        ("kind", *kind),
                    ];
                    (labels, *value)
                })
        })
        .collect();
    let token_mints = members
        .iter()
        .flat_map(|(member, entry)| {
            entry.token_mints.iter().map(move |(result, value)| {
                (
                    vec![("member", member.as_str()), ("result", *result)],
                    *value,
                )
            })
        })
        .collect();
    let expiry = watched
        .iter()
        .filter_map(|(member, health)| {
            let at = health.credential_expiry()?;
            let secs = at.duration_since(std::time::SystemTime::UNIX_EPOCH).ok()?;
            Some((vec![("member", *member)], secs.as_secs()))
        })
        .collect();
    vec![
        Family {
            name: "credential_expiry_timestamp_seconds",
            help: "When the credential a member's requests carry expires (JWT exp, exec \
                   expirationTimestamp, certificate notAfter), in Unix seconds; absent for \
                   credentials without an expiry.",
            kind: MetricType::Gauge,
            samples: expiry,
        },
        Family {
            name: "members",
            help: "Member clusters being watched.",
            kind: MetricType::Gauge,
            samples: vec![(Vec::new(), u64::try_from(watched.len()).unwrap_or(u64::MAX))],
        },
        Family {
            name: "unauthorized_responses",
            help: "401 responses from a member, before and after a credential refresh.",
            kind: MetricType::Counter,
            samples: per_watched(|h| h.stats().unauthorized_responses),
        },
        Family {
            name: "retries",
            help: "Requests sent again, once, with a refreshed credential after a 401.",
            kind: MetricType::Counter,
            samples: per_watched(|h| h.stats().retries),
        },
        Family {
            name: "credential_state",
            help: "1 for what the member last said of its credential, 0 for the other states: \
                   unknown, valid, unauthorized (a 401 after a refresh; formerly rejected), \
                   unavailable.",
            kind: MetricType::Gauge,
            samples: credential_state,
        },
        Family {
            name: "member_ready",
            help: "1 while a member's Ready condition is True, else 0.",
            kind: MetricType::Gauge,
            samples: ready,
        },
        Family {
            name: "relists",
            help: "Full relists of a mirrored resource on a member; a credential rotation \
                   causes none.",
            kind: MetricType::Counter,
            samples: relists,
        },
        Family {
            name: "watch_errors",
            help: "Failed lists and watches of a mirrored resource on a member, by failure \
                   kind: unauthorized, forbidden, not_found, credential_unavailable, \
                   unreachable, limit_exceeded (the member sent more than it may, or too \
                   slowly), other.",
            kind: MetricType::Counter,
            samples: watch_errors,
        },
        Family {
            name: "token_mints",
            help: "Token mints for a member by result: success (written back), failed (refused, \
                   unverified, unreadable or unwritable home), expired (the token in the home \
                   had expired), conflict (the home changed during the mint; nothing written), \
                   refused (the operator's bounds forbid it: another identity, over a cap).",
            kind: MetricType::Counter,
            samples: token_mints,
        },
    ]
}

impl Collector for Watched {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let caches = self.credential_caches();
        let members = self.members();
        for family in credential_cache_families(&caches)
            .iter()
            .chain(&member_families(&members))
            .chain([&leader_family(self.leader())])
        {
            family.encode(&mut encoder)?;
        }
        Ok(())
    }
}

/// The `kind` label: the [`FailureKind`] in snake_case.
pub(super) fn failure_kind_label(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::Unauthorized => "unauthorized",
        FailureKind::Forbidden => "forbidden",
        FailureKind::NotFound => "not_found",
        FailureKind::CredentialUnavailable => "credential_unavailable",
        FailureKind::Unreachable => "unreachable",
        FailureKind::LimitExceeded => "limit_exceeded",
        FailureKind::Other => "other",
    }
}

/// The `state` label; the reason of `Unavailable` stays out of labels (unbounded values).
fn credential_state_label(state: &CredentialState) -> &'static str {
    match state {
        CredentialState::Unknown => "unknown",
        CredentialState::Valid => "valid",
        CredentialState::Unauthorized => "unauthorized",
        CredentialState::Unavailable { .. } => "unavailable",
    }
}
