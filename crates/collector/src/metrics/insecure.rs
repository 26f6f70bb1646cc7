//! `tether_insecure_members`: how many members run without verifying their apiserver's
//! certificate, read from the registry at scrape time.

use std::{
    fmt,
    sync::{PoisonError, RwLock},
};

use cluster_registry::Registry;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric as _},
    metrics::{MetricType, gauge::ConstGauge},
};

/// The registry to count in, once the collector has one.
#[derive(Debug, Default)]
pub(super) struct InsecureMembers(RwLock<Option<Registry>>);

impl InsecureMembers {
    pub(super) fn watch(&self, registry: Registry) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Some(registry);
    }
}

impl Collector for InsecureMembers {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let count = self
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or(0, Registry::insecure_members);
        let gauge = ConstGauge::new(i64::try_from(count).unwrap_or(i64::MAX));
        let metric = encoder.encode_descriptor(
            "insecure_members",
            "Members admitted with insecureSkipTLSVerification (--allow-insecure-members)",
            None,
            MetricType::Gauge,
        )?;
        gauge.encode(metric)
    }
}
