//! The fence against an apiserver that keeps one `Cluster` and checks `resourceVersion`
//! preconditions as a real one does: a replica that lost a member without noticing
//! overwrites nothing.

use std::sync::{Arc, Mutex};

use cluster_registry::karmada::{Cluster, ClusterStatus};
use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};
use kube::{Api, client::Body};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{Claim, FenceError, OWNER_CONDITION, StatusFence};
use crate::shard::{Assignment, ShardMap, ShardView};

const MEMBER: &str = "m1";

/// The stored `Cluster`: its `resourceVersion` and status.
type Stored = Arc<Mutex<(u64, Value)>>;

fn object(stored: &(u64, Value)) -> Value {
    json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": { "name": MEMBER, "resourceVersion": stored.0.to_string() },
        "spec": { "syncMode": "Push" },
        "status": stored.1,
    })
}

/// GET of the `Cluster`, and merge patches of its status refused with 409 when their
/// `metadata.resourceVersion` is not the stored one.
fn apiserver() -> (Api<Cluster>, Stored) {
    let stored: Stored = Arc::new(Mutex::new((1, json!({}))));
    let shared = stored.clone();
    let service = tower::service_fn(move |req: http::Request<Body>| {
        let shared = shared.clone();
        async move {
            let method = req.method().clone();
            let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
            let mut stored = shared.lock().unwrap();
            let (status, body) = if method == http::Method::PATCH {
                let patch: Value = serde_json::from_slice(&bytes).unwrap_or_default();
                match patch["metadata"]["resourceVersion"].as_str() {
                    Some(version) if version != stored.0.to_string() => (
                        409,
                        json!({ "kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "reason": "Conflict", "code": 409,
                                "message": "the object has been modified" }),
                    ),
                    _ => {
                        stored.0 += 1;
                        stored.1 = patch["status"].clone();
                        (200, object(&stored))
                    }
                }
            } else {
                (200, object(&stored))
            };
            let body = serde_json::to_vec(&body).unwrap_or_default();
            http::Response::builder()
                .status(status)
                .body(Body::from(body))
        }
    });
    (Api::all(kube::Client::new(service, "default")), stored)
}

/// Replica `me` of the group {a, b}, placing [`MEMBER`] on `owner`.
fn fence(clusters: &Api<Cluster>, me: &str, owner: &str, settle_secs: u64) -> StatusFence {
    let view = ShardView::of(me, &[owner]);
    let members = [MEMBER.to_owned()].into();
    let assignment = Assignment::compute(&members, &view.replicas, 0.25);
    let map = ShardMap::default();
    map.set(view.clone(), assignment);
    let (_sender, receiver) = watch::channel(view);
    StatusFence::from_parts(
        clusters.clone(),
        receiver,
        map,
        std::time::Duration::from_secs(settle_secs),
        format!("tether-collector.{me}"),
    )
}

fn status(reason: &str) -> ClusterStatus {
    ClusterStatus {
        conditions: vec![Condition {
            type_: "Ready".to_owned(),
            status: "True".to_owned(),
            reason: reason.to_owned(),
            message: String::new(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }],
        ..ClusterStatus::default()
    }
}

fn stored_claim(stored: &Stored) -> (String, String) {
    let stored = stored.lock().unwrap();
    let conditions = stored.1["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let find = |type_: &str, field: &str| {
        let condition = conditions.iter().find(|c| c["type"] == type_);
        condition.map(|c| c[field].to_string()).unwrap_or_default()
    };
    (find("Ready", "reason"), find(OWNER_CONDITION, "message"))
}

#[tokio::test]
async fn a_replica_that_lost_a_member_without_noticing_overwrites_nothing() {
    let (clusters, stored) = apiserver();
    // Replica a owns the member and writes it.
    let a = fence(&clusters, "a", "a", 0);
    a.write(MEMBER, &status("ByA")).await.unwrap();
    assert_eq!(
        stored_claim(&stored),
        ("\"ByA\"".into(), "\"a/1/1\"".into())
    );

    // Replica b's view has moved the member to b; a's has not (it has not noticed).
    let b = fence(&clusters, "b", "b", 0);
    b.write(MEMBER, &status("ByB")).await.unwrap();
    assert_eq!(
        stored_claim(&stored),
        ("\"ByB\"".into(), "\"b/1/2\"".into())
    );

    let refused = a.write(MEMBER, &status("ByAStale")).await.unwrap_err();
    assert!(
        matches!(&refused, FenceError::ClaimedBy { owner } if owner == "b/1"),
        "{refused:?}"
    );
    assert_eq!(
        stored_claim(&stored),
        ("\"ByB\"".into(), "\"b/1/2\"".into()),
        "b's status stands"
    );
    // b goes on writing over its own last write.
    b.write(MEMBER, &status("ByBAgain")).await.unwrap();
    assert_eq!(stored_claim(&stored).0, "\"ByBAgain\"");
}

#[tokio::test]
async fn another_claim_is_taken_over_only_after_the_views_settled() {
    let (clusters, stored) = apiserver();
    fence(&clusters, "a", "a", 0)
        .write(MEMBER, &status("ByA"))
        .await
        .unwrap();
    let b = fence(&clusters, "b", "b", 3600);
    let waiting = b.write(MEMBER, &status("ByB")).await.unwrap_err();
    assert!(
        matches!(waiting, FenceError::ClaimedBy { .. }),
        "{waiting:?}"
    );
    assert_eq!(stored_claim(&stored).1, "\"a/1/1\"");
    // Not the owner in its own view: nothing is even tried.
    let c = fence(&clusters, "c", "a", 0);
    assert!(matches!(
        c.write(MEMBER, &status("ByC")).await,
        Err(FenceError::NotOwner)
    ));
}

#[test]
fn a_claim_reads_back_from_its_condition() {
    let claim = Claim {
        owner: "shard-a/3".to_owned(),
        epoch: 7,
        since: Time(Timestamp::UNIX_EPOCH),
    };
    let cluster = Cluster {
        metadata: kube::api::ObjectMeta::default(),
        spec: serde_json::from_value(json!({"syncMode": "Push"})).unwrap(),
        status: Some(ClusterStatus {
            conditions: vec![claim.condition()],
            ..ClusterStatus::default()
        }),
    };
    assert_eq!(Claim::of(&cluster), Some(claim));
}

#[tokio::test]
async fn a_forged_last_epoch_is_taken_over_without_overflow() {
    let (clusters, stored) = apiserver();
    stored.lock().unwrap().1 = json!({ "conditions": [{
        "type": OWNER_CONDITION, "status": "True", "reason": "Claimed",
        "message": format!("forged/1/{}", u64::MAX),
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }]});
    fence(&clusters, "b", "b", 0)
        .write(MEMBER, &status("ByB"))
        .await
        .unwrap();
    assert_eq!(
        stored_claim(&stored),
        ("\"ByB\"".into(), format!("\"b/1/{}\"", u64::MAX))
    );
}

/// A `Cluster` whose status carries `conditions` (as JSON) and nothing else.
fn cluster_with(conditions: serde_json::Value) -> Option<Cluster> {
    serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": { "name": MEMBER },
        "spec": { "syncMode": "Push" },
        "status": { "conditions": conditions },
    }))
    .ok()
}

#[tokio::test]
async fn a_forged_claim_is_reported_as_bounded_text() {
    let (clusters, stored) = apiserver();
    let forged = format!("a\n\u{1b}[31mforged log line\r{}/1/2", "x".repeat(1 << 20));
    stored.lock().unwrap().1 = json!({ "conditions": [{
        "type": OWNER_CONDITION, "status": "True", "reason": "Claimed",
        "message": forged, "lastTransitionTime": "2024-01-01T00:00:00Z",
    }]});
    let refused = fence(&clusters, "b", "b", 3600)
        .write(MEMBER, &status("ByB"))
        .await
        .unwrap_err();
    let shown = refused.to_string();
    assert!(
        shown.len() <= 2 * member_client::text::Text::MAX_BYTES,
        "{} bytes",
        shown.len()
    );
    assert!(!shown.chars().any(char::is_control), "{shown:?}");
}

fn condition_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    let message = prop_oneof![
        "[a-z0-9-]{0,10}/[0-9-]{0,4}/[0-9-]{0,22}",
        Just(format!("a/1/{}", u64::MAX)),
        Just(format!("a/1/{}0", u64::MAX)),
        Just("/".to_owned()),
        Just("//".to_owned()),
        Just("a/1/007".to_owned()),
        Just("a/1/+7".to_owned()),
        "\\PC{0,40}",
        any::<String>(),
    ];
    let type_ = prop_oneof![Just(OWNER_CONDITION.to_owned()), "[A-Za-z]{0,8}"];
    let time = prop_oneof![
        Just(json!("2024-01-01T00:00:00Z")),
        Just(json!("9999-12-31T23:59:59Z")),
        Just(json!("not a time")),
        Just(json!(null)),
    ];
    (type_, message, time).prop_map(|(type_, message, time)| {
        json!({ "type": type_, "status": "True", "reason": "Claimed", "message": message,
                "lastTransitionTime": time })
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(1_000),
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Any conditions read back: a claim exactly when the owner condition's message ends in
    /// `/<u64>`, whose parts are the message's own.
    #[test]
    fn claims_read_back_from_any_status_are_parsed_or_absent(
        conditions in proptest::collection::vec(condition_json(), 0..4),
    ) {
        let Some(cluster) = cluster_with(json!(conditions)) else {
            return Ok(());
        };
        let message = cluster.status.as_ref().and_then(|s| {
            s.conditions.iter().find(|c| c.type_ == OWNER_CONDITION).map(|c| c.message.clone())
        });
        match (Claim::of(&cluster), message) {
            // Not the message's text again: `+7` and `007` are epoch 7 too.
            (Some(claim), Some(message)) => {
                let (owner, epoch) = message.rsplit_once('/').unwrap();
                proptest::prop_assert_eq!(claim.owner.as_str(), owner);
                proptest::prop_assert_eq!(Some(claim.epoch), epoch.parse::<u64>().ok());
            }
            (None, Some(message)) => {
                let parsed = message.rsplit_once('/').and_then(|(_, e)| e.parse::<u64>().ok());
                proptest::prop_assert!(parsed.is_none(), "{:?}", message);
            }
            (claim, None) => proptest::prop_assert!(claim.is_none()),
        }
    }
}
