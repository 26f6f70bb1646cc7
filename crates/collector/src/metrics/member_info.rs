//! `tether_member_info`: for each member, where it is defined, which host its requests go to
//! and what kind of credential they carry, as labels on a constant 1.
//!
//! An info metric, so that a query or an alert can `* on (member) group_left (...)` these
//! labels onto any per-member series instead of every family carrying them.

use std::{
    fmt,
    sync::{Arc, RwLock},
};

use cluster_registry::Registry;
use member_client::CredentialHealth;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric as _},
    metrics::{MetricType, gauge::ConstGauge},
};

use super::scrape::{Watched, read, write};
use crate::cli::MembersFrom;

/// The `kind` label before any request carried a credential (or for a member that has no
/// client); the same word `tether_credential_state` uses for "not decided yet".
const KIND_UNKNOWN: &str = "unknown";

/// Reads the members from [`Watched`] and their endpoints from the [`Registry`], at scrape
/// time.
#[derive(Debug)]
pub(super) struct MemberInfo {
    watched: Arc<Watched>,
    defined_by: RwLock<Option<DefinedBy>>,
}

/// The registry the members come from, and the `source` label of all of them.
#[derive(Debug)]
struct DefinedBy {
    registry: Registry,
    source: &'static str,
}

/// One sample's labels.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct InfoLabels<'a> {
    pub(super) member: String,
    pub(super) source: &'a str,
    /// Empty when the member's definition gives no usable endpoint.
    pub(super) endpoint_host: String,
    pub(super) kind: &'static str,
}

const HELP: &str = "1 for each member. source: the kind of source that defines it \
                    (karmada, argocd, directory, clusterprofile, or kubeconfig for Cluster \
                    API's and Flux's Secrets alike); endpoint_host: the host of its API \
                    endpoint (no scheme, port, path or user info; empty without a usable \
                    endpoint); kind: the credential its requests carry (token, exec, \
                    certificate; unknown before the first).";

impl MemberInfo {
    pub(super) fn new(watched: Arc<Watched>) -> Self {
        Self {
            watched,
            defined_by: RwLock::default(),
        }
    }

    /// Reads endpoints from `registry`; every member is labelled with the kind of source
    /// `--members-from` reads.
    ///
    /// NB: the registry cannot tell a Cluster API kubeconfig Secret from a Flux one (both are
    /// `kubeconfig`), and a collector reads one kind of source, so the flag names it.
    pub(super) fn watch(&self, registry: Registry, members_from: MembersFrom) {
        let source = members_from.source_kind().as_str();
        *write(&self.defined_by) = Some(DefinedBy { registry, source });
    }
}

impl Collector for MemberInfo {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let defined_by = read(&self.defined_by);
        let samples = match &*defined_by {
            Some(DefinedBy { registry, source }) => info_labels(&self.watched, source, |name| {
                registry.spec(name).map(|spec| spec.endpoint.url)
            }),
            // Members come from the registry; before there is one there is nothing to label.
            None => Vec::new(),
        };
        let mut family = encoder.encode_descriptor("member_info", HELP, None, MetricType::Gauge)?;
        for sample in &samples {
            let labels = [
                ("member", sample.member.as_str()),
                ("source", sample.source),
                ("endpoint_host", sample.endpoint_host.as_str()),
                ("kind", sample.kind),
            ];
            ConstGauge::new(1).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// The samples of `tether_member_info`: one per member `watched` knows, sorted by member.
/// `endpoint` gives a member's API URL, if its definition has one.
pub(super) fn info_labels<'a>(
    watched: &Watched,
    source: &'a str,
    endpoint: impl Fn(&str) -> Option<String>,
) -> Vec<InfoLabels<'a>> {
    // Names and kinds are copied out first, so that the member lock is not held while the
    // registry's lock is taken.
    let members: Vec<(String, &'static str)> = watched
        .members()
        .iter()
        .map(|(name, entry)| {
            let kind = entry
                .health
                .as_ref()
                .and_then(CredentialHealth::credential_kind)
                .map_or(KIND_UNKNOWN, |kind| kind.as_str());
            (name.clone(), kind)
        })
        .collect();
    members
        .into_iter()
        .map(|(member, kind)| InfoLabels {
            endpoint_host: endpoint(&member)
                .as_deref()
                .and_then(endpoint_host)
                .unwrap_or_default(),
            member,
            source,
            kind,
        })
        .collect()
}

/// The host of an API URL: no scheme, port, path or user info (which could hold a password),
/// an IPv6 address in brackets. The port is left out because the host is what an operator
/// matches against DNS, a firewall rule or a certificate; `member` already tells endpoints
/// apart.
pub(super) fn endpoint_host(endpoint: &str) -> Option<String> {
    let uri: http::Uri = endpoint.parse().ok()?;
    uri.host()
        .filter(|host| !host.is_empty())
        .map(str::to_owned)
}
