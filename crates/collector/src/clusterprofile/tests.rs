//! The publisher against a scripted apiserver: which requests it makes, and when it makes none.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use cluster_registry::{DirectoryConfig, MemberSpec, RegistryBuilder};
use kube::client::Body;
use member_client::{CredentialKey, validation::MemberEndpoint};
use rstest::rstest;
use serde_json::json;
use tokio::sync::watch;

use super::{
    access::ProfileAccess, api::ProfilesApi, credential_marks::SecretMarks,
    publisher::ProfilePublisher,
};
use crate::member::{health::MemberHealth, status::MemberStatus};

/// Every request the apiserver got, as `METHOD path`.
type Log = Arc<Mutex<Vec<String>>>;

/// An apiserver that answers every profile request as if member1's profile were Tether's, and
/// every Secret request with member1's unmarked Secret.
fn scripted() -> (kube::Client, Log) {
    scripted_with_secret(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "member1", "namespace": "karmada-cluster", "resourceVersion": "7"},
        "data": {"token": "dG9rZW4="}}))
}

/// As [`scripted`], answering Secret requests with `secret`.
fn scripted_with_secret(secret: serde_json::Value) -> (kube::Client, Log) {
    answering(
        secret,
        json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": { "name": "member1", "namespace": "fleet", "uid": "u1",
                          "resourceVersion": "1",
                          "labels": { "x-k8s.io/cluster-manager": "tether" } },
            "spec": { "clusterManager": { "name": "tether" } },
        }),
    )
}

/// An apiserver that answers every Secret request with `secret` and every other with `profile`.
fn answering(secret: serde_json::Value, profile: serde_json::Value) -> (kube::Client, Log) {
    let log = Log::default();
    let seen = log.clone();
    let service = tower::service_fn(move |req: http::Request<Body>| {
        seen.lock()
            .unwrap()
            .push(format!("{} {}", req.method(), req.uri().path()));
        let answer = if req.uri().path().contains("/secrets/") {
            &secret
        } else {
            &profile
        };
        let body = serde_json::to_vec(answer).unwrap_or_default();
        async move { http::Response::builder().status(200).body(Body::from(body)) }
    });
    (kube::Client::new(service, "default"), log)
}

fn publisher(client: kube::Client, leader: Option<watch::Receiver<bool>>) -> ProfilePublisher {
    // Its source never lists here, so no garbage is collected.
    let (registry, _events, _driver) = RegistryBuilder::new()
        .directory(DirectoryConfig::new(std::path::PathBuf::from("/m")))
        .build();
    let (publisher, writes) = ProfilePublisher::new(
        ProfilesApi::new(client.clone(), "fleet"),
        SecretMarks::new(client),
        "fleet".to_owned(),
        registry,
        leader,
    );
    tokio::spawn(writes);
    publisher
}

fn access() -> ProfileAccess {
    let spec = MemberSpec {
        name: "member1".into(),
        endpoint: MemberEndpoint::new("https://10.0.0.1:6443"),
        secret_ref: CredentialKey::new("karmada-cluster", "member1"),
        federation: None,
        mint_request: None,
    };
    ProfileAccess::of(&spec, None)
}

/// Lets the writer run, and more than a retry period pass.
async fn settle() {
    tokio::time::sleep(Duration::from_secs(6)).await;
}

fn taken(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

const PROFILE: &str =
    "/apis/multicluster.x-k8s.io/v1alpha1/namespaces/fleet/clusterprofiles/member1";
const SECRET: &str = "/api/v1/namespaces/karmada-cluster/secrets/member1";

#[tokio::test(start_paused = true)]
async fn writes_once_per_change_and_deletes_a_forgotten_member() {
    let (client, log) = scripted();
    let profiles = publisher(client, None);
    profiles.define("member1", Some(access()));
    let mut healthy = MemberStatus::with_health(MemberHealth::Healthy);
    profiles.submit("member1", &healthy);
    settle().await;
    assert_eq!(
        taken(&log),
        [
            format!("GET {SECRET}"),
            format!("PATCH {SECRET}"),
            format!("GET {PROFILE}"),
            format!("PATCH {PROFILE}"),
            format!("PATCH {PROFILE}/status"),
        ],
        "marks the Secret, looks once, then applies the object and its status"
    );

    // A node count is in the Cluster's status, not in the profile: nothing to write.
    healthy.set_nodes(3, 3);
    profiles.submit("member1", &healthy);
    settle().await;
    assert_eq!(taken(&log), Vec::<String>::new());

    profiles.submit(
        "member1",
        &MemberStatus::with_health(MemberHealth::Unauthorized),
    );
    settle().await;
    assert_eq!(
        taken(&log),
        [
            format!("PATCH {PROFILE}"),
            format!("PATCH {PROFILE}/status")
        ]
    );

    profiles.forget("member1");
    settle().await;
    assert_eq!(
        taken(&log),
        [format!("GET {PROFILE}"), format!("DELETE {PROFILE}")],
        "deleted once it is seen to be Tether's"
    );
}

#[tokio::test(start_paused = true)]
async fn a_foreign_profile_left_alone_is_logged_once_and_not_as_deleted() {
    let logs = member_client::test_util::LogBuffer::default();
    let writer = logs.clone();
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || writer.clone())
            .finish(),
    );
    // member1's profile is another manager's.
    let (client, log) = answering(
        serde_json::Value::Null,
        json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": { "name": "member1", "namespace": "fleet", "uid": "u1",
                          "resourceVersion": "1",
                          "labels": { "x-k8s.io/cluster-manager": "other-manager" } },
        }),
    );
    let profiles = publisher(client, None);
    profiles.define("member1", None);
    profiles.forget("member1");
    settle().await;
    assert_eq!(
        taken(&log),
        [format!("GET {PROFILE}")],
        "read, never deleted"
    );
    let logged = logs.text();
    assert_eq!(
        logged
            .matches("not deleting a ClusterProfile Tether does not manage")
            .count(),
        1,
        "{logged}"
    );
    assert!(logged.contains("manager=\"other-manager\""), "{logged}");
    assert!(!logged.contains("ClusterProfile deleted"), "{logged}");
}

#[tokio::test(start_paused = true)]
async fn a_follower_writes_nothing_until_it_leads() {
    let (client, log) = scripted();
    let (leading, leader) = watch::channel(false);
    let profiles = publisher(client, Some(leader));
    profiles.define("member1", Some(access()));
    profiles.submit("member1", &MemberStatus::with_health(MemberHealth::Healthy));
    profiles.forget("gone");
    settle().await;
    assert_eq!(taken(&log), Vec::<String>::new());

    leading.send(true).unwrap();
    settle().await;
    let requests = taken(&log);
    assert!(
        requests.contains(&format!("PATCH {PROFILE}/status")),
        "{requests:?}"
    );
    assert!(
        !requests.iter().any(|r| r.starts_with("DELETE")),
        "a removal seen while following is left to the garbage collection: {requests:?}"
    );
}

/// A Secret marked for another member, a ServiceAccount token's, or one already marked for
/// the member: not patched, and not read again at the next round.
#[rstest]
#[case::marked_for_another_member(json!({"apiVersion": "v1", "kind": "Secret",
    "metadata": {"name": "member1", "namespace": "karmada-cluster",
                 "labels": {"tether.io/member": "member2"}}}))]
#[case::a_service_account_token(json!({"apiVersion": "v1", "kind": "Secret",
    "type": "kubernetes.io/service-account-token",
    "metadata": {"name": "member1", "namespace": "karmada-cluster"}}))]
#[case::already_marked_for_the_member_and_its_server(json!({"apiVersion": "v1", "kind": "Secret",
    "metadata": {"name": "member1", "namespace": "karmada-cluster",
                 "labels": {"tether.io/member": "member1"},
                 "annotations": {"tether.io/server": "https://10.0.0.1:6443"}}}))]
#[tokio::test(start_paused = true)]
async fn a_secret_not_to_mark_is_left_alone(#[case] secret: serde_json::Value) {
    let (client, log) = scripted_with_secret(secret);
    let profiles = publisher(client, None);
    profiles.define("member1", Some(access()));
    profiles.submit("member1", &MemberStatus::with_health(MemberHealth::Healthy));
    settle().await;
    let requests = taken(&log);
    assert_eq!(requests[0], format!("GET {SECRET}"), "{requests:?}");
    assert!(
        !requests.contains(&format!("PATCH {SECRET}")),
        "never marked: {requests:?}"
    );
    assert!(
        requests.contains(&format!("PATCH {PROFILE}/status")),
        "the profile is still published: {requests:?}"
    );
    // Refused marks wait a minute before the Secret is read again.
    settle().await;
    assert!(!taken(&log).contains(&format!("GET {SECRET}")));
}

/// An apiserver with member1's profile, Tether's at version 1, that another manager takes
/// over right after the publisher's first read: the race between a check and a write. It
/// checks a write's `resourceVersion` as the apiserver does, and takes a write without one
/// unconditionally. Returns the client, the request log, and the writes that went through.
fn taken_over_after_the_read() -> (kube::Client, Log, Arc<Mutex<Vec<String>>>) {
    let log = Log::default();
    let applied = Arc::new(Mutex::new(Vec::new()));
    let (seen, through) = (log.clone(), applied.clone());
    let version = Arc::new(Mutex::new(1_u32));
    let service = tower::service_fn(move |req: http::Request<Body>| {
        let (seen, through, version) = (seen.clone(), through.clone(), version.clone());
        async move {
            let line = format!("{} {}", req.method(), req.uri().path());
            seen.lock().unwrap().push(line.clone());
            let is_profile = req.uri().path().contains("/clusterprofiles/");
            let method = req.method().clone();
            let body = req.into_body().collect_bytes().await.unwrap_or_default();
            let sent: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let current = *version.lock().unwrap();
            let manager = if current == 1 {
                "tether"
            } else {
                "other-manager"
            };
            let profile = |rv: u32| {
                json!({
                    "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
                    "metadata": { "name": "member1", "namespace": "fleet", "uid": "u1",
                                  "resourceVersion": rv.to_string(),
                                  "labels": { "x-k8s.io/cluster-manager": manager } },
                    "spec": { "clusterManager": { "name": manager } },
                })
            };
            let (code, answer) = if !is_profile {
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "member1", "namespace": "karmada-cluster"}}),
                )
            } else if method == http::Method::GET {
                let answer = profile(current);
                // The takeover lands right after the read.
                *version.lock().unwrap() = 2;
                (200, answer)
            } else {
                match sent["metadata"]["resourceVersion"].as_str() {
                    Some(rv) if rv != current.to_string() => (
                        409,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                               "reason": "Conflict", "code": 409,
                               "message": "the object has been modified"}),
                    ),
                    _ => {
                        through.lock().unwrap().push(line);
                        (200, profile(current))
                    }
                }
            };
            let body = serde_json::to_vec(&answer).unwrap_or_default();
            http::Response::builder()
                .status(code)
                .body(Body::from(body))
        }
    });
    (kube::Client::new(service, "default"), log, applied)
}

#[tokio::test(start_paused = true)]
async fn a_profile_taken_over_between_the_read_and_the_write_is_not_written() {
    let (client, log, applied) = taken_over_after_the_read();
    let profiles = publisher(client, None);
    profiles.define("member1", Some(access()));
    profiles.submit("member1", &MemberStatus::with_health(MemberHealth::Healthy));
    settle().await;
    settle().await;
    let requests = taken(&log);
    assert!(
        requests.contains(&format!("GET {PROFILE}")),
        "it was read: {requests:?}"
    );
    let applied = applied.lock().unwrap();
    assert!(
        !applied.iter().any(|w| w.contains("/clusterprofiles/")),
        "the other manager's profile was written over: {applied:?}; requests {requests:?}"
    );
}
