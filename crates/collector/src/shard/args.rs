//! The flags of sharding.

use std::time::Duration;

use clap::{Args, ValueEnum};

/// Whether replicas split the members between them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ShardMode {
    /// One writer, chosen by leader election (`--leader-elect`); every replica watches every
    /// member.
    #[default]
    Off,
    /// Every replica holds a Lease `tether-shard-<identity>` and owns a share of the members.
    Auto,
}

/// Sharding across collector replicas.
#[derive(Clone, Debug, Args)]
pub struct ShardArgs {
    /// `auto`: split the members between the replicas. Each replica renews its own Lease
    /// `tether-shard-<identity>` in `--leader-election-namespace`; all of them place every
    /// member on one live replica by rendezvous hashing with bounded loads (no replica holds
    /// more than ⌈(1 + `--shard-load-factor`) · members / replicas⌉), and each watches, probes,
    /// mirrors and writes status only for its own. Status writes are fenced: each carries the
    /// writer's claim (condition `TetherShardOwner`, message `<identity>/<generation>/<epoch>`)
    /// and the `resourceVersion` of its own last write, so a replica that lost a member
    /// without noticing overwrites nothing. The read API of a replica answers for its own members and sends
    /// others to their owner (421). `off`: leader election as before. Not with
    /// `--mint-tokens`, `--mint-tokens-for` or `--publish-clusterprofiles`, which need a
    /// single writer.
    #[arg(
        long,
        value_enum,
        default_value_t = ShardMode::Off,
        env = "TETHER_SHARDS",
        conflicts_with_all = ["mint_tokens", "mint_tokens_for", "publish_clusterprofiles"],
    )]
    pub shards: ShardMode,

    /// Seconds a replica's shard Lease lasts without renewal: the longest its members go
    /// without an owner after it dies without releasing it. Renewed every third of it.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(3..=3600))]
    pub shard_lease_seconds: u64,

    /// How far above its fair share a replica's load may go: 0.25 lets a replica hold up to
    /// 1.25 × members / replicas. Lower evens the load, higher moves fewer members when
    /// replicas come and go.
    #[arg(long, default_value_t = 0.25, value_parser = load_factor)]
    pub shard_load_factor: f64,

    /// The shard group: replicas with the same group (and namespace) share the members.
    #[arg(long, default_value = "tether-collector", value_parser = group_name)]
    pub shard_group: String,

    /// The UID of this replica's pod (the downward API's `metadata.uid`), whose name is the
    /// identity: the shard Lease is then owned by the pod, and deleted with it.
    #[arg(long = "shard-pod-uid", env = "POD_UID")]
    pub pod_uid: Option<String>,
}

impl ShardArgs {
    /// The Lease duration.
    pub fn lease_duration(&self) -> Duration {
        Duration::from_secs(self.shard_lease_seconds)
    }
}

/// A load factor in `[0.01, 10]`, to two decimals.
fn load_factor(raw: &str) -> Result<f64, String> {
    let value: f64 = raw.parse().map_err(|err| format!("{err}"))?;
    (0.01..=10.0)
        .contains(&value)
        .then(|| (value * 100.0).round() / 100.0)
        .ok_or_else(|| format!("{value} is not in [0.01, 10]"))
}

/// A label value: up to 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both ends.
fn group_name(raw: &str) -> Result<String, String> {
    let edges_ok = raw.starts_with(|c: char| c.is_ascii_alphanumeric())
        && raw.ends_with(|c: char| c.is_ascii_alphanumeric());
    let chars_ok = raw
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    (raw.len() <= 63 && edges_ok && chars_ok)
        .then(|| raw.to_owned())
        .ok_or_else(|| format!("{raw:?} is not a label value"))
}

/// Whether `identity` makes a valid Lease name `tether-shard-<identity>` (a DNS-1123
/// subdomain), as a pod name does.
pub(crate) fn is_lease_identity(identity: &str) -> bool {
    cluster_registry::names::is_dns1123_subdomain(&format!(
        "{}{identity}",
        super::membership::LEASE_PREFIX
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_factors_and_groups_are_checked() {
        assert_eq!(load_factor("0.25"), Ok(0.25));
        assert_eq!(load_factor("0.333"), Ok(0.33));
        for bad in ["0", "-1", "11", "x", "NaN"] {
            assert!(load_factor(bad).is_err(), "{bad}");
        }
        assert!(group_name("tether-collector").is_ok());
        for bad in ["", "-a", "a b", &"a".repeat(64)] {
            assert!(group_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sharding_refuses_every_single_writer_flag() {
        use clap::Parser as _;
        let parse = |extra: &[&str]| {
            crate::cli::Args::try_parse_from(["collector", "--shards", "auto"].iter().chain(extra))
        };
        assert!(parse(&[]).is_ok());
        for single_writer in [
            &["--mint-tokens"][..],
            &["--mint-tokens-for", "member1"],
            &["--publish-clusterprofiles", "fleet"],
        ] {
            assert!(parse(single_writer).is_err(), "{single_writer:?}");
        }
    }

    #[test]
    fn identities_must_make_lease_names() {
        assert!(is_lease_identity("tether-collector-5d8f7-abcde"));
        assert!(!is_lease_identity("Host_1234"));
        assert!(!is_lease_identity("a-"));
    }
}
