//! `tether_insecure_members`: how many members run without verifying their apiserver's
//! certificate, read from the registry at scrape time.

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
pub(super) struct InsecureMembers(RwLock<Option<Registry>>);

impl InsecureMembers {
    pub(super) fn watch(&self, registry: Registry) {
        *write(&self.0) = Some(registry);
    }
}

impl Collector for InsecureMembers {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let count = read(&self.0).as_ref().map_or(0, Registry::insecure_members);
        let gauge = ConstGauge::new(i64::try_from(count).unwrap_or(i64::MAX));
        let metric = encoder.encode_descriptor(
            "insecure_members",
            "Members admitted with insecureSkipTLSVerification (--allow-insecure-members).",
            None,
            MetricType::Gauge,
        )?;
        gauge.encode(metric)
    }
}
