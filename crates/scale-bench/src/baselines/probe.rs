//! One (model, member) client of the baselines, and what it saw.

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use futures::StreamExt as _;
use k8s_openapi::api::{apps::v1::Deployment, authentication::v1::SelfSubjectReview};
use kube::{
    Api, Client, ResourceExt as _,
    api::PostParams,
    runtime::{WatchStreamExt as _, reflector, watcher},
};
use member_client::FailureKind;

use super::{CANARY, models::Model};
use crate::scale::fleet::Member;

/// One (model, member) client and what it saw.
pub(super) struct Probe {
    pub(super) model: Model,
    pub(super) member: String,
    /// When its Secret write was acknowledged.
    pub(super) acked: Option<SystemTime>,
    /// First request (its send time) that carried the new token.
    pub(super) first_new: Arc<Mutex<Option<SystemTime>>>,
    pub(super) failed_401: Arc<AtomicU64>,
    pub(super) store: reflector::Store<Deployment>,
    pub(super) tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Probe {
    pub(super) fn canary_ready(&self) -> Option<i32> {
        self.store
            .state()
            .iter()
            .find(|d| d.name_any() == CANARY)
            .and_then(|d| d.status.as_ref()?.ready_replicas)
    }
}

/// Starts one (model, member) client: a Deployment watch and a `SelfSubjectReview` every
/// `period`, counting 401s and noting the first request that carried the new token.
pub(super) fn start_probe(
    model: Model,
    member: &Member,
    namespace: &str,
    next: u32,
    client: Client,
    period: Duration,
) -> Probe {
    let failed_401 = Arc::new(AtomicU64::new(0));
    let first_new = Arc::new(Mutex::new(None));
    let new_user = format!(
        "system:serviceaccount:{namespace}:{}",
        member.service_account(next)
    );

    let (store, writer) = reflector::store();
    let failures = Arc::clone(&failed_401);
    let watch = reflector(
        writer,
        watcher(
            Api::<Deployment>::namespaced(client.clone(), namespace),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .for_each(move |event| {
        if let Err(
            watcher::Error::InitialListFailed(err)
            | watcher::Error::WatchStartFailed(err)
            | watcher::Error::WatchFailed(err),
        ) = &event
            && FailureKind::of(err) == FailureKind::Unauthorized
        {
            failures.fetch_add(1, Ordering::Relaxed);
        }
        std::future::ready(())
    });

    let (failures, seen, want) = (Arc::clone(&failed_401), Arc::clone(&first_new), new_user);
    let requests = async move {
        let reviews = Api::<SelfSubjectReview>::all(client);
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let sent = SystemTime::now();
            match reviews
                .create(&PostParams::default(), &SelfSubjectReview::default())
                .await
            {
                Ok(review) => {
                    let user = review
                        .status
                        .and_then(|s| s.user_info)
                        .and_then(|u| u.username);
                    if user.as_deref() == Some(want.as_str()) {
                        lock(&seen).get_or_insert(sent);
                    }
                }
                Err(err) if FailureKind::of(&err) == FailureKind::Unauthorized => {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {}
            }
        }
    };
    Probe {
        model,
        member: member.name.clone(),
        acked: None,
        first_new,
        failed_401,
        store,
        tasks: vec![tokio::spawn(watch), tokio::spawn(requests)],
    }
}

/// Locks `mutex`; its values are plain data, so a poisoned lock is used as it is.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
