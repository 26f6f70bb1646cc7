//! Who is in the shard group: each replica's own Lease, `tether-shard-<identity>`, renewed
//! every third of its duration; the live replicas are the Leases that are not expired.
//!
//! Expiry is judged the way client-go's leader election judges it, on this replica's own
//! clock: a Lease is live while its `resourceVersion` changed less than [`expiry`] ago (its
//! duration less two reads, so that its members have an owner again within the duration). A
//! Lease seen for the first time is dated by its `renewTime`, so a restarted replica does not
//! wait a whole duration to notice a replica that is long gone.

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ListParams, ObjectMeta, PostParams},
};
use tokio::{sync::watch, time::Instant};

use super::{
    ShardArgs,
    liveness::{Live, Liveness, MAX_GROUP},
    view::{Member, ShardView},
};

/// The label every shard Lease carries; the group is its value.
pub(crate) const GROUP_LABEL: &str = "tether.io/shard-group";

/// The most shard Leases one read takes in.
const MAX_REPLICAS: u32 = 1000;

/// The prefix of a replica's Lease name.
pub(crate) const LEASE_PREFIX: &str = "tether-shard-";

/// How a replica takes part: as `identity`, with a Lease in `namespace`, as the shard flags
/// say. With `--shard-pod-uid` the Lease is owned by the pod (named after the identity), so
/// the garbage collector deletes it with the pod and Leases of gone pods do not pile up.
#[derive(Clone, Debug)]
pub(crate) struct MembershipConfig {
    pub(crate) namespace: String,
    pub(crate) identity: String,
    pub(crate) args: ShardArgs,
}

impl MembershipConfig {
    /// This replica's Lease name.
    pub(crate) fn lease_name(&self) -> String {
        format!("{LEASE_PREFIX}{}", self.identity)
    }

    /// How often the Lease is renewed: a third of its duration.
    fn renew_period(&self) -> Duration {
        self.args.lease_duration() / 3
    }

    /// How often the group's Leases are read: at most a second, so a released or expired
    /// Lease is noticed within a second of it.
    pub(crate) fn poll_period(&self) -> Duration {
        self.renew_period().min(Duration::from_secs(1))
    }
}

/// Keeps this replica's Lease and publishes the group as it changes.
pub(crate) struct Membership {
    leases: Api<Lease>,
    config: MembershipConfig,
    /// Which Leases are live.
    liveness: Liveness,
    /// Live Leases left out of the full group at the last read.
    over_cap: usize,
    /// When this replica last renewed its own Lease, and with which generation.
    renewed: Option<(Instant, i32)>,
    /// The view's `term`, and whether this replica was in the group at the last read.
    term: u64,
    joined: bool,
}

impl Membership {
    pub(crate) fn new(client: Client, config: MembershipConfig) -> Self {
        Self {
            leases: Api::namespaced(client, &config.namespace),
            liveness: Liveness::new(config.args.lease_duration(), config.poll_period()),
            over_cap: 0,
            config,
            renewed: None,
            term: 0,
            joined: false,
        }
    }

    /// Renews and reads until `view` has no receiver left; every change is sent on `view`.
    pub(crate) async fn run(mut self, view: watch::Sender<ShardView>) {
        let mut tick = tokio::time::interval(self.config.poll_period());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = view.closed() => return,
                _ = tick.tick() => {}
            }
            // Read before renewing: a replica woken from a pause longer than its Lease sees
            // that it lapsed (and so rejoins with a new term) rather than renewing over it.
            self.publish(&view).await;
            let now = Instant::now();
            let due = self
                .renewed
                .is_none_or(|(at, _)| now.duration_since(at) >= self.config.renew_period());
            if due {
                match self.renew().await {
                    // Just (re)joined: the others see the Lease from their next read, so take
                    // the members at once rather than a read later.
                    Ok(()) if !self.joined => self.publish(&view).await,
                    Ok(()) => {}
                    Err(err) => {
                        tracing::warn!(error = %err, lease = %self.config.lease_name(), "renewing the shard Lease failed");
                    }
                }
            }
        }
    }

    /// Reads the group and sends the view if it changed.
    async fn publish(&mut self, view: &watch::Sender<ShardView>) {
        match self.read().await {
            Ok(next) => {
                view.send_if_modified(|current| {
                    let changed = *current != next;
                    if changed {
                        *current = next;
                    }
                    changed
                });
            }
            Err(err) => tracing::warn!(error = %err, "reading the shard Leases failed"),
        }
    }

    /// Creates this replica's Lease (a new generation) or renews it.
    async fn renew(&mut self) -> Result<(), kube::Error> {
        let name = self.config.lease_name();
        let now = MicroTime(Timestamp::now());
        let started = Instant::now();
        let existing = self.leases.get_opt(&name).await?;
        let generation = match (&self.renewed, &existing) {
            (Some((_, generation)), _) => *generation,
            // A new process is a new generation of this identity: fences written by the
            // previous one no longer count as this one's.
            (None, Some(lease)) => next_generation(lease),
            (None, None) => 1,
        };
        let mut lease = existing.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..Lease::default()
        });
        lease
            .metadata
            .labels
            .get_or_insert_default()
            .insert(GROUP_LABEL.to_owned(), self.config.args.shard_group.clone());
        if let Some(uid) = &self.config.args.pod_uid {
            lease.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Pod".to_owned(),
                name: self.config.identity.clone(),
                uid: uid.clone(),
                ..OwnerReference::default()
            }]);
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if self.renewed.is_none() {
            spec.acquire_time = Some(now.clone());
        }
        spec.holder_identity = Some(self.config.identity.clone());
        spec.lease_duration_seconds =
            Some(i32::try_from(self.config.args.lease_duration().as_secs()).unwrap_or(i32::MAX));
        spec.lease_transitions = Some(generation);
        spec.renew_time = Some(now);
        if lease.metadata.resource_version.is_some() {
            self.leases
                .replace(&name, &PostParams::default(), &lease)
                .await?;
        } else {
            self.leases.create(&PostParams::default(), &lease).await?;
        }
        self.renewed = Some((started, generation));
        Ok(())
    }

    /// The group as the Leases say now.
    async fn read(&mut self) -> Result<ShardView, kube::Error> {
        let selector = format!("{GROUP_LABEL}={}", self.config.args.shard_group);
        // One page: a group of more replicas than this is not one Tether can be.
        let list = self
            .leases
            .list(&ListParams::default().labels(&selector).limit(MAX_REPLICAS))
            .await?;
        let now = Instant::now();
        let live = self.liveness.judge(&list.items, now, Timestamp::now());
        // This replica is a member only while its own renewal is within the duration, by its
        // own clock: once it cannot renew, it must assume the others have taken over.
        let me = self
            .renewed
            .filter(|(at, _)| {
                now.saturating_duration_since(*at) < self.config.args.lease_duration()
            })
            .map(|(_, generation)| Member {
                identity: self.config.identity.clone(),
                generation,
            });
        let (Live { replicas, over_cap }, me) = live.with(&self.config.identity, me);
        self.count_over_cap(over_cap);
        if me.is_some() && !self.joined {
            self.term = self.term.saturating_add(1);
        }
        self.joined = me.is_some();
        Ok(ShardView {
            replicas,
            me,
            term: self.term,
        })
    }

    /// Keeps the count of Leases the full group left out, and says so when it changes: a
    /// group this large is someone writing Leases, not replicas starting.
    fn count_over_cap(&mut self, over_cap: usize) {
        if over_cap != self.over_cap {
            if over_cap > 0 {
                tracing::warn!(
                    group = %self.config.args.shard_group,
                    ignored = over_cap,
                    max = MAX_GROUP,
                    "the shard group has more live Leases than it may hold; those of the \
                     highest identities are ignored"
                );
            } else {
                tracing::info!(group = %self.config.args.shard_group, "the shard group is within its size again");
            }
            self.over_cap = over_cap;
        }
    }

    /// Gives this replica's Lease up (no holder), so the others take its members over at once.
    /// The Lease itself stays for the next process of this identity, or until the garbage
    /// collector deletes it with its pod.
    pub(crate) async fn release(client: Client, config: &MembershipConfig, deadline: Duration) {
        let leases: Api<Lease> = Api::namespaced(client, &config.namespace);
        let name = config.lease_name();
        let release = async {
            let mut lease = leases.get(&name).await?;
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = None;
                spec.renew_time = None;
            }
            leases.replace(&name, &PostParams::default(), &lease).await
        };
        match tokio::time::timeout(deadline, release).await {
            Ok(Ok(_)) => tracing::info!(lease = %name, "released the shard Lease"),
            Ok(Err(err)) => {
                tracing::warn!(lease = %name, error = %err, "releasing the shard Lease failed")
            }
            Err(_) => {
                tracing::warn!(lease = %name, ?deadline, "releasing the shard Lease timed out")
            }
        }
    }
}

/// The generation after the one `lease` records. `leaseTransitions` is anyone's to write, so
/// a forged `i32::MAX` stays there and a negative one counts as none.
pub(crate) fn next_generation(lease: &Lease) -> i32 {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.lease_transitions)
        .unwrap_or(0)
        .max(0)
        .saturating_add(1)
}
