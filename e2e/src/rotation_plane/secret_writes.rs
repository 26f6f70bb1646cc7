//! Counting the writes that change a member Secret's token, as a watch sees them.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, runtime::watcher};
use testkit::karmada::SECRET_NAMESPACE;

use super::RotationPlane;

impl RotationPlane {
    /// Starts counting, per member Secret, the writes that changed its token.
    pub fn count_secret_writes(&self) -> SecretWrites {
        let api = Api::<Secret>::namespaced(self.karmada.client().clone(), SECRET_NAMESPACE);
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let seen = counts.clone();
        let task = tokio::spawn(async move {
            let mut tokens: BTreeMap<String, Vec<u8>> = BTreeMap::new();
            let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let (secret, counted) = match event {
                    Ok(watcher::Event::Apply(secret)) => (secret, true),
                    Ok(watcher::Event::InitApply(secret)) => (secret, false),
                    _ => continue,
                };
                let name = secret.metadata.name.clone().unwrap_or_default();
                let token = secret
                    .data
                    .and_then(|d| d.get("token").map(|t| t.0.clone()))
                    .unwrap_or_default();
                let changed = tokens.insert(name.clone(), token.clone()) != Some(token);
                if counted && changed {
                    *seen
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(name)
                        .or_insert(0) += 1;
                }
            }
        });
        SecretWrites { counts, task }
    }
}

/// Token-changing writes per member Secret, counted since it started; stops when dropped.
pub struct SecretWrites {
    counts: Arc<Mutex<BTreeMap<String, u32>>>,
    task: tokio::task::JoinHandle<()>,
}

impl SecretWrites {
    /// The counts so far.
    pub fn counts(&self) -> BTreeMap<String, u32> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for SecretWrites {
    fn drop(&mut self) {
        self.task.abort();
    }
}
