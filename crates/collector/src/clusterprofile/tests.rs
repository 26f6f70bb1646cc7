//! The publisher against a scripted apiserver: which requests it makes, and when it makes none.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use cluster_registry::{DirectoryConfig, MemberSpec, RegistryBuilder};
use kube::client::Body;
use member_client::SecretRef;
use serde_json::json;
use tokio::sync::watch;

use super::{access::ProfileAccess, api::ProfilesApi, publisher::ProfilePublisher};
use crate::member::{health::MemberHealth, status::MemberStatus};

/// Every request the apiserver got, as `METHOD path`.
type Log = Arc<Mutex<Vec<String>>>;

/// An apiserver that answers every profile request as if member1's profile were Tether's.
fn scripted() -> (kube::Client, Log) {
    let log = Log::default();
    let seen = log.clone();
    let service = tower::service_fn(move |req: http::Request<Body>| {
        let line = format!("{} {}", req.method(), req.uri().path());
        seen.lock().unwrap().push(line);
        let profile = json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": { "name": "member1", "namespace": "fleet", "uid": "u1",
                          "resourceVersion": "1",
                          "labels": { "x-k8s.io/cluster-manager": "tether" } },
            "spec": { "clusterManager": { "name": "tether" } },
        });
        let body = serde_json::to_vec(&profile).unwrap_or_default();
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
        ProfilesApi::new(client, "fleet"),
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
        api_endpoint: "https://10.0.0.1:6443".into(),
        secret_ref: SecretRef::new("karmada-cluster", "member1"),
        insecure_skip_tls_verify: false,
        proxy_url: None,
        tls_server_name: None,
        token_rotation: None,
    };
    ProfileAccess::of(&spec, None)
}

fn status(health: MemberHealth) -> MemberStatus {
    let mut status = MemberStatus::default();
    status.set_health(health);
    status
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

#[tokio::test(start_paused = true)]
async fn writes_once_per_change_and_deletes_a_forgotten_member() {
    let (client, log) = scripted();
    let profiles = publisher(client, None);
    profiles.define("member1", Some(access()));
    let mut healthy = status(MemberHealth::Healthy);
    profiles.submit("member1", &healthy);
    settle().await;
    assert_eq!(
        taken(&log),
        [
            format!("GET {PROFILE}"),
            format!("PATCH {PROFILE}"),
            format!("PATCH {PROFILE}/status"),
        ],
        "looks once, then applies the object and its status"
    );

    // A node count is in the Cluster's status, not in the profile: nothing to write.
    healthy.set_nodes(3, 3);
    profiles.submit("member1", &healthy);
    settle().await;
    assert_eq!(taken(&log), Vec::<String>::new());

    profiles.submit("member1", &status(MemberHealth::Unauthorized));
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
async fn a_follower_writes_nothing_until_it_leads() {
    let (client, log) = scripted();
    let (leading, leader) = watch::channel(false);
    let profiles = publisher(client, Some(leader));
    profiles.define("member1", Some(access()));
    profiles.submit("member1", &status(MemberHealth::Healthy));
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
