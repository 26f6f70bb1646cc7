use std::sync::{Arc, Mutex};

use kube::client::Body;
use serde_json::{Value, json};

use super::*;

/// The path and body of each request the control plane received.
type Requests = Arc<Mutex<Vec<(String, Value)>>>;

/// A control plane that answers every TokenRequest with `status` and `body`, keeping each
/// request's path and body.
fn control_plane(status: u16, body: Value) -> (Client, Requests) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let service = tower::service_fn(move |req: http::Request<Body>| {
        let (kept, body) = (kept.clone(), body.clone());
        async move {
            let path = req.uri().path().to_owned();
            let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
            let asked: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            kept.lock().unwrap().push((path, asked));
            http::Response::builder()
                .status(status)
                .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
    });
    (Client::new(service, "default"), seen)
}

fn granted(token: &str) -> Value {
    json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": { "audiences": ["x"] },
        "status": { "token": token, "expirationTimestamp": "2030-01-01T00:10:00Z" },
    })
}

fn refused(code: u16, message: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Status", "status": "Failure",
        "message": message, "reason": "Forbidden", "code": code,
    })
}

#[tokio::test]
async fn a_member_key_mints_a_token_for_that_members_audience_only() {
    let (client, seen) = control_plane(200, granted("minted-token"));
    let config = FederatedConfig::new("tether-system", "collector")
        .audience_prefix("https://cp.example/")
        .lifetime(Duration::from_secs(900));
    let identity = FederatedIdentity::new(client, config);

    let credential = identity
        .fetch(&CredentialKey::federated("member1"))
        .await
        .unwrap();

    assert_eq!(credential.kind(), CredentialKind::Federated);
    assert_eq!(
        credential.expires_at(),
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_893_456_600))
    );
    assert!(!format!("{credential:?}").contains("minted-token"));
    let seen = seen.lock().unwrap();
    let [(path, asked)] = seen.as_slice() else {
        panic!("one TokenRequest, not {seen:?}");
    };
    assert_eq!(
        path,
        "/api/v1/namespaces/tether-system/serviceaccounts/collector/token"
    );
    assert_eq!(
        asked["spec"]["audiences"],
        json!(["https://cp.example/member1"])
    );
    assert_eq!(asked["spec"]["expirationSeconds"], json!(900));
}

#[tokio::test]
async fn a_key_that_names_a_secret_mints_nothing() {
    let (client, seen) = control_plane(200, granted("minted-token"));
    let identity = FederatedIdentity::new(client, FederatedConfig::new("ns", "sa"));
    let err = identity
        .fetch(&CredentialKey::new("karmada-cluster", "member1"))
        .await
        .unwrap_err();
    assert!(matches!(err, SourceError::NotFound { .. }), "{err:?}");
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_refusal_is_permanent_and_says_the_status_without_the_token() {
    let (client, _) = control_plane(403, refused(403, "cannot create serviceaccounts/token"));
    let identity = FederatedIdentity::new(client, FederatedConfig::new("ns", "sa"));
    let err = identity.mint("member1").await.unwrap_err();
    assert!(
        matches!(
            &err,
            SourceError::Federation(FederationError::Refused { code: 403, .. })
        ),
        "{err:?}"
    );
    assert!(!err.is_transient());
    assert!(err.to_string().contains("ns/sa (403)"), "{err}");
}

#[tokio::test]
async fn a_server_error_is_transient() {
    let (client, _) = control_plane(500, refused(500, "etcd timed out"));
    let identity = FederatedIdentity::new(client, FederatedConfig::new("ns", "sa"));
    let err = identity.mint("member1").await.unwrap_err();
    assert!(
        matches!(
            &err,
            SourceError::Federation(FederationError::Failed { .. })
        ),
        "{err:?}"
    );
    assert!(err.is_transient());
}

#[tokio::test]
async fn an_answer_without_a_token_is_an_empty_token() {
    let (client, _) = control_plane(200, granted("  "));
    let identity = FederatedIdentity::new(client, FederatedConfig::new("ns", "sa"));
    let err = identity.mint("member1").await.unwrap_err();
    assert!(matches!(err, SourceError::EmptyToken), "{err:?}");
}

#[test]
fn a_lifetime_under_the_minimum_is_raised_to_it() {
    let config = FederatedConfig::new("ns", "sa").lifetime(Duration::from_secs(60));
    assert_eq!(config.lifetime, MIN_LIFETIME);
}

#[test]
fn no_secret_key_is_a_federated_key() {
    // A Kubernetes namespace never holds a `/`, so no Secret can pose as a member's key.
    assert_eq!(
        CredentialKey::new("tether.io", "federated/member1").federated_member(),
        None
    );
    assert_eq!(CredentialKey::new("", "member1").federated_member(), None);
}
