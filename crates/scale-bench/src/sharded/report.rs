//! What the sharded run measured, and how it is printed.

use std::time::Duration;

/// One replica in the steady-state window.
#[derive(Clone, Debug)]
pub struct ReplicaCost {
    /// Its identity.
    pub identity: String,
    /// Members it served.
    pub members: usize,
    /// Member credentials in its memory (`tether_member_credentials_held`; `None` if it does
    /// not report them).
    pub credentials_held: Option<f64>,
    /// RSS at the end of the window.
    pub rss_bytes: u64,
    /// CPU over the window, in cores.
    pub cpu_cores: f64,
}

/// One change of the group: a replica killed or added.
#[derive(Clone, Debug)]
pub struct Handover {
    /// Members whose owner changed.
    pub moved: usize,
    /// The longest any member was served by no replica.
    pub longest_unserved: Duration,
    /// The longest any member was served by two.
    pub longest_doubled: Duration,
    /// From the change to every member served by exactly one replica (`None`: not within the
    /// limit).
    pub rebalanced: Option<Duration>,
    /// From the change to every replica holding the credentials of its share and no others
    /// (`None`: not within the limit, or not reported).
    pub credentials_in_place: Option<Duration>,
    /// Whether the replicas report the credentials they hold.
    pub credentials_reported: bool,
}

/// The mass rotation across every shard.
#[derive(Clone, Debug)]
pub struct Rotation {
    /// Token fetches from the Secret store (one per switched member).
    pub fetches: f64,
    /// Relists across all replicas.
    pub relists: f64,
    /// 401s across all replicas.
    pub unauthorized: f64,
    /// Members seen `CredentialsValid=False`.
    pub credentials_false: usize,
    /// Members `Ready=True` at the end.
    pub ready: usize,
    /// Secrets written, old ServiceAccounts revoked, one probe period.
    pub elapsed: Duration,
}

/// Everything the sharded run measured.
#[derive(Clone, Debug)]
pub struct ShardedReport {
    /// Members in the fleet.
    pub members: usize,
    /// Replicas at the start.
    pub replicas: usize,
    /// `--shard-lease-seconds`.
    pub lease_seconds: u64,
    /// Start of the first replica to every `Cluster` `Ready=True`.
    pub all_ready: Option<Duration>,
    /// Whether every member was served by exactly one replica before the window.
    pub settled: bool,
    /// Per replica, in the window.
    pub costs: Vec<ReplicaCost>,
    /// Watches open on the member apiservers at the end of the window.
    pub watches: f64,
    /// Requests per second to the member apiservers in the window.
    pub requests_per_second: f64,
    /// Members of the killed replica.
    pub orphans: usize,
    /// The SIGKILL of one replica.
    pub kill: Handover,
    /// The start of one more.
    pub add: Handover,
    /// The mass rotation.
    pub rotation: Rotation,
    /// Status writes seen, all replicas.
    pub status_writes: u64,
    /// Status writes over a newer claim: must be 0.
    pub double_writes: usize,
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn within_the_limit(d: Option<Duration>) -> String {
    d.map_or("not within the limit".to_owned(), seconds)
}

/// Prints `report` as a table on stdout.
pub fn print(report: &ShardedReport) {
    let n = report.members;
    // Killing one of R moves its share, n / R; adding the R-th back moves the same share.
    let ideal = n as f64 / report.replicas.max(1) as f64;
    println!(
        "Tether sharded: {n} members, {} replicas (--shard-lease-seconds {})",
        report.replicas, report.lease_seconds
    );
    println!();
    println!("| measure | value |");
    println!("| --- | --- |");
    let ready = within_the_limit(report.all_ready);
    println!(
        "| start → all {n} Ready | {ready} (one owner each: {}) |",
        report.settled
    );
    let total_rss: u64 = report.costs.iter().map(|c| c.rss_bytes).sum();
    for cost in &report.costs {
        let held = cost
            .credentials_held
            .map_or("not reported".to_owned(), |h| format!("{h:.0}"));
        println!(
            "| {} | {} members, {held} credentials held, RSS {}, CPU {:.3} cores |",
            cost.identity,
            cost.members,
            crate::table::mib(cost.rss_bytes),
            cost.cpu_cores
        );
    }
    println!(
        "| per member | RSS {:.0} KiB, {:.2} watches, {:.3} requests/s |",
        total_rss as f64 / 1024.0 / n.max(1) as f64,
        report.watches / n.max(1) as f64,
        report.requests_per_second / n.max(1) as f64
    );
    let handover = |what: &str, h: &super::Handover| {
        let rebalanced = within_the_limit(h.rebalanced);
        let credentials = match h.credentials_reported {
            true => within_the_limit(h.credentials_in_place),
            false => "not reported".to_owned(),
        };
        println!(
            "| {what} | {} moved ({:.2}× the ideal {ideal:.0}), rebalanced in {rebalanced}, \
             credentials held by the owners only in {credentials}, longest without an owner \
             {}, longest with two {} |",
            h.moved,
            h.moved as f64 / ideal.max(1.0),
            seconds(h.longest_unserved),
            seconds(h.longest_doubled)
        );
    };
    let killed = format!("SIGKILL of one replica ({} members)", report.orphans);
    handover(&killed, &report.kill);
    handover("one replica added", &report.add);
    let r = &report.rotation;
    println!(
        "| mass rotation of all {n} | {:.0} fetches, {:.0} relists, {:.0} 401s, {} CredentialsValid=False, {} Ready after, {} |",
        r.fetches,
        r.relists,
        r.unauthorized,
        r.credentials_false,
        r.ready,
        seconds(r.elapsed)
    );
    println!(
        "| status writes | {} in all, {} over a newer claim (goal 0) |",
        report.status_writes, report.double_writes
    );
}
