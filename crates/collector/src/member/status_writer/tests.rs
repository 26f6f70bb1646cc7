//! What the writer reads back from a `Cluster`'s status is anyone's to write: it reaches an
//! Event only as bounded text without control characters.

use std::sync::{Arc, Mutex};

use kube::client::Body;
use serde_json::{Value, json};

use super::*;

/// An apiserver with one `Cluster` whose `Ready` reason is `reason`; it accepts status patches
/// and keeps every Event posted.
fn apiserver(reason: String) -> (Client, Arc<Mutex<Vec<Value>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let posted = events.clone();
    let service = tower::service_fn(move |req: http::Request<Body>| {
        let (posted, reason) = (posted.clone(), reason.clone());
        async move {
            let is_event = req.uri().path().contains("/events");
            let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
            let cluster = json!({
                "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                "metadata": { "name": "m1", "resourceVersion": "1" },
                "spec": { "syncMode": "Push" },
                "status": { "conditions": [{
                    "type": READY_CONDITION, "status": "True", "reason": reason, "message": "",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }]},
            });
            let body = if is_event {
                let event: Value = serde_json::from_slice(&bytes).unwrap_or_default();
                posted.lock().unwrap().push(event.clone());
                event
            } else {
                cluster
            };
            http::Response::builder()
                .status(200)
                .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
        }
    });
    (Client::new(service, "default"), events)
}

#[tokio::test]
async fn a_forged_ready_reason_reaches_the_event_as_bounded_text() {
    let forged = format!("Evil\n\u{1b}[31mforged\r{}", "x".repeat(1 << 20));
    let (client, events) = apiserver(forged);
    let writes = Writes {
        clusters: Api::all(client.clone()),
        recorder: Recorder::new(client, Reporter::from(MANAGER.to_owned())),
        queue: Arc::new(Queue::default()),
        written: BTreeMap::new(),
        fence: None,
    };
    assert!(writes.publish("m1", &MemberStatus::default(), None).await);
    let events = events.lock().unwrap();
    let note = events
        .first()
        .and_then(|event| event["note"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(note.contains("(was Evil"), "{note:?}");
    let bytes = note.len();
    assert!(
        bytes <= 2 * member_client::text::Text::MAX_BYTES,
        "{bytes} bytes"
    );
    assert!(!note.chars().any(char::is_control), "{note:?}");
}
