//! The gauges read from the registry at scrape time: `tether_insecure_members` (how many
//! members run without verifying their apiserver's certificate) and
//! `tether_member_credentials_held` (how many member credentials are in memory).

use std::{fmt, sync::RwLock};

use cluster_registry::Registry;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric as _},
    metrics::{MetricType, gauge::ConstGauge},
};

use super::scrape::{read, write};

/// The registry to count in, once the collector has one.
#[derive(Debug, Default)]
pub(super) struct RegistryGauges(RwLock<Option<Registry>>);

impl RegistryGauges {
    pub(super) fn watch(&self, registry: Registry) {
        *write(&self.0) = Some(registry);
    }
}

impl Collector for RegistryGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let registry = read(&self.0).clone();
        let insecure = registry.as_ref().map_or(0, Registry::insecure_members);
        let held = (registry.as_ref()).map_or(0, |r| r.secrets().credentials_held());
        let gauges = [
            (
                "insecure_members",
                "Members admitted with insecureSkipTLSVerification (--allow-insecure-members).",
                insecure,
            ),
            (
                "member_credentials_held",
                "Member credentials in this replica's memory: every usable one, or with \
                 --shards auto only those of the members it serves.",
                held,
            ),
        ];
        for (name, help, count) in gauges {
            let gauge = ConstGauge::new(i64::try_from(count).unwrap_or(i64::MAX));
            gauge.encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
        }
        Ok(())
    }
}
