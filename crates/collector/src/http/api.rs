//! The read API over the mirrored member clusters: `/api/v1/clusters…`.
//!
//! The handlers only read: the data comes from a [`ClusterReader`] that the collector's mirror
//! cache implements, so that this module knows nothing about informers.

use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::Serialize;

use super::HttpState;
use crate::{
    mirror::{ClusterSummary, MirroredResource},
    shard::Owner,
};

/// The header naming the replica whose shard a sharded collector's answer covers.
pub(crate) const SHARD_HEADER: &str = "tether-shard";

/// Read access to the mirrored member clusters.
///
/// # Concurrent calls
/// Called from request handlers on any worker thread, so implementations must answer quickly
/// and without blocking on I/O: copy out of the cache and release any lock before returning.
pub(crate) trait ClusterReader: Send + Sync + 'static {
    /// Summaries of all members, sorted by name.
    fn clusters(&self) -> Vec<ClusterSummary>;
    /// One member's summary.
    fn cluster(&self, name: &str) -> Option<ClusterSummary>;
    /// The mirrored objects of one resource on one member, sorted by namespace and name, or
    /// `None` if that member or resource is not mirrored.
    fn objects(&self, name: &str, resource: &MirroredResource) -> Option<Vec<serde_json::Value>>;
}

/// Why a read API request has no answer. Rendered as `{"error": "<message>"}` with a status.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ApiError {
    /// No member of that name is mirrored. 404.
    #[error("cluster {name:?} is not mirrored")]
    ClusterNotFound {
        /// The requested member.
        name: String,
    },
    /// With sharding: another replica owns the member and answers for it. 421.
    #[error("cluster {name:?} is served by replica {owner:?}")]
    ClusterElsewhere {
        /// The requested member.
        name: String,
        /// The identity of the replica that owns it.
        owner: String,
    },
    /// The member is mirrored, but not that resource. 404.
    #[error("resource {resource:?} is not mirrored on cluster {name:?}")]
    ResourceNotFound {
        /// The requested member.
        name: String,
        /// The requested `group/version/resource`.
        resource: String,
    },
}

impl ApiError {
    /// The HTTP status this error is answered with.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::ClusterNotFound { .. } | Self::ResourceNotFound { .. } => StatusCode::NOT_FOUND,
            Self::ClusterElsewhere { .. } => StatusCode::MISDIRECTED_REQUEST,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = serde_json::json!({ "error": self.to_string() });
        if let Self::ClusterElsewhere { owner, .. } = &self {
            body["owner"] = owner.clone().into();
        }
        (self.status(), Json(body)).into_response()
    }
}

/// The body of an object listing, shaped like a Kubernetes list so clients can reuse decoders.
#[derive(Serialize)]
struct ObjectList {
    items: Vec<serde_json::Value>,
}

pub(super) async fn list_clusters(State(state): State<HttpState>) -> Response {
    let clusters = Json(state.clusters.clusters());
    // Sharded, the list is this replica's shard only: say whose.
    match state.shard.as_ref().and_then(crate::shard::ShardMap::me) {
        Some(me) => ([(SHARD_HEADER, me)], clusters).into_response(),
        None => clusters.into_response(),
    }
}

/// The answer for a member this replica does not mirror: another replica's (421), or none.
fn not_mirrored(state: &HttpState, name: String) -> ApiError {
    match state.shard.as_ref().map(|shard| shard.owner(&name)) {
        Some(Owner::Replica(owner)) => ApiError::ClusterElsewhere { name, owner },
        _ => ApiError::ClusterNotFound { name },
    }
}

pub(super) async fn get_cluster(
    State(state): State<HttpState>,
    Path(name): Path<String>,
) -> Result<Json<ClusterSummary>, ApiError> {
    state
        .clusters
        .cluster(&name)
        .map(Json)
        .ok_or_else(|| not_mirrored(&state, name))
}

pub(super) async fn list_objects(
    State(state): State<HttpState>,
    Path((name, group, version, resource)): Path<(String, String, String, String)>,
) -> Result<Response, ApiError> {
    let path = format!("{group}/{version}/{resource}");
    let items = path
        .parse::<MirroredResource>()
        .ok()
        .and_then(|resource| state.clusters.objects(&name, &resource));
    if let Some(items) = items {
        return Ok(Json(ObjectList { items }).into_response());
    }
    // Tell "no such member" from "member without that resource": they need different fixes.
    if state.clusters.cluster(&name).is_none() {
        return Err(not_mirrored(&state, name));
    }
    Err(ApiError::ResourceNotFound {
        name,
        resource: path,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{get, state};
    use axum::http::{StatusCode, header};
    use serde_json::{Value, json};

    fn m1_json() -> Value {
        json!({
            "name": "m1",
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "ClusterReady",
                "message": "cluster is healthy and ready to accept workloads",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }],
            "kubernetesVersion": "v1.34.1",
            "nodeSummary": {"totalNum": 2, "readyNum": 1},
            "resources": ["apps/v1/deployments"],
        })
    }

    async fn get_json(uri: &str) -> (StatusCode, Value) {
        let (status, headers, body) = get(&state(), uri).await;
        assert_eq!(headers[header::CONTENT_TYPE], "application/json", "{uri}");
        (status, serde_json::from_str(&body).unwrap())
    }

    /// Each read route's status and JSON body, in Karmada's field names; a 404 says which
    /// part is missing.
    #[tokio::test]
    async fn each_read_route_answers_its_json_or_a_404_saying_what_is_missing() {
        let (ok, not_found) = (StatusCode::OK, StatusCode::NOT_FOUND);
        let m9 = json!({"error": r#"cluster "m9" is not mirrored"#});
        let secrets =
            json!({"error": r#"resource "core/v1/secrets" is not mirrored on cluster "m1""#});
        let web = json!({"items": [{"metadata": {"name": "web", "namespace": "default"}}]});
        for (uri, want) in [
            ("/api/v1/clusters", (ok, json!([m1_json()]))),
            ("/api/v1/clusters/m1", (ok, m1_json())),
            ("/api/v1/clusters/m9", (not_found, m9.clone())),
            ("/api/v1/clusters/m1/apps/v1/deployments", (ok, web)),
            ("/api/v1/clusters/m9/apps/v1/deployments", (not_found, m9)),
            ("/api/v1/clusters/m1/core/v1/secrets", (not_found, secrets)),
        ] {
            assert_eq!(get_json(uri).await, want, "{uri}");
        }
    }

    #[tokio::test]
    async fn a_sharded_replica_sends_other_members_to_their_owner() {
        use crate::shard::{Assignment, ShardMap, ShardView};
        let members = (0..20).map(|i| format!("m{i}")).collect();
        let view = ShardView::of("a", &["a", "b"]);
        let assignment = Assignment::compute(&members, &view.replicas, 0.25);
        let elsewhere = (0..20)
            .map(|i| format!("m{i}"))
            .find(|m| assignment.owner(m) == Some("b"))
            .unwrap();
        let map = ShardMap::default();
        map.set(view, assignment);
        let mut sharded = state();
        sharded.shard = Some(map);
        let (status, headers, body) = get(&sharded, &format!("/api/v1/clusters/{elsewhere}")).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["owner"], "b", "{body}");
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        let (status, headers, _) = get(&sharded, "/api/v1/clusters").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[super::SHARD_HEADER], "a");
    }
}
