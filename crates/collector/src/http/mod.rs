//! The collector's HTTP surface: `/healthz`, `/readyz`, `/metrics` and a read API over the
//! mirrored member clusters.

mod api;
pub(crate) mod auth;
mod health;
mod metrics;
mod server;
pub(crate) mod tls;

use std::sync::Arc;

use axum::{Router, http::StatusCode, middleware, routing::get};
use tower_http::timeout::TimeoutLayer;

pub(crate) use api::ClusterReader;
pub(crate) use server::{DEFAULT_MAX_CONNECTIONS_PER_PEER, ServerLimits, serve};

use crate::{metrics::Metrics, readiness::Readiness, shard::ShardMap};

/// What the handlers read. Every field is a cheap handle, so cloning per request is cheap.
#[derive(Clone)]
pub(crate) struct HttpState {
    /// Encoded by `/metrics`.
    pub(crate) metrics: Metrics,
    /// Reported by `/readyz`.
    pub(crate) readiness: Readiness,
    /// Served by `/api/v1/clusters…`.
    pub(crate) clusters: Arc<dyn ClusterReader>,
    /// With `--shards auto`: who owns the members this replica does not serve.
    pub(crate) shard: Option<ShardMap>,
}

/// The probe port's routes: `/healthz` and `/readyz` only, served on a listener of their own
/// (`--probe-listen`) so that no caller of the API port can make the kubelet's probes wait.
pub(crate) fn probe_router(state: HttpState, request_timeout: std::time::Duration) -> Router {
    with_probes(Router::new(), state, request_timeout)
}

/// `routes` with the open `/healthz` and `/readyz` added, over `state`; every request gets 503
/// after `request_timeout`.
fn with_probes(
    routes: Router<HttpState>,
    state: HttpState,
    request_timeout: std::time::Duration,
) -> Router {
    routes
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .with_state(state)
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            request_timeout,
        ))
}

/// Every route, over `state`. With a `gate`, `/metrics` and `/api/...` answer only callers it
/// allows ([`auth`]); without one (`--insecure-serve-api`) they answer anyone. `/healthz` and
/// `/readyz` are always open and say nothing about identities or RBAC; they are here too for
/// callers of the API port, but the kubelet probes them on [`probe_router`]'s port.
///
/// | route | answer |
/// | --- | --- |
/// | `GET /healthz` | 200 `ok` while the process serves (liveness) |
/// | `GET /readyz` | 200 `ok` when ready, else 503 with a short reason |
/// | `GET /metrics` | OpenMetrics text |
/// | `GET /api/v1/readiness` | `{"ready": bool, "reason": "<full reason>"}` |
/// | `GET /api/v1/clusters` | JSON list of [`ClusterSummary`]; sharded, this replica's members only, with a `tether-shard: <identity>` header |
/// | `GET /api/v1/clusters/{name}` | one [`ClusterSummary`], or 404; sharded, 421 `{"owner": ...}` for a member another replica owns |
/// | `GET /api/v1/clusters/{name}/{group}/{version}/{resource}` | `{"items": [...]}`, or 404 |
///
/// Every request gets 503 after `request_timeout`.
///
/// [`ClusterSummary`]: crate::mirror::ClusterSummary
pub(crate) fn router(
    state: HttpState,
    gate: Option<auth::AccessGate>,
    request_timeout: std::time::Duration,
) -> Router {
    let protected = Router::new()
        .route("/metrics", get(metrics::metrics))
        .route("/api/v1/readiness", get(health::readiness))
        .route("/api/v1/clusters", get(api::list_clusters))
        .route("/api/v1/clusters/{name}", get(api::get_cluster))
        .route(
            "/api/v1/clusters/{name}/{group}/{version}/{resource}",
            get(api::list_objects),
        );
    // `route_layer`: only the routes above, and only matched ones, are reviewed, so the probes
    // added after it are open, and an unknown path is a plain 404 that costs the control plane
    // nothing.
    let protected = match gate {
        Some(gate) => {
            protected.route_layer(middleware::from_fn_with_state(gate, auth::require_access))
        }
        None => protected,
    };
    with_probes(protected, state, request_timeout)
}

#[cfg(test)]
pub(super) mod tests {
    //! Shared fixtures for the route tests in this module's files, and the `serve` test.

    use super::*;
    use crate::mirror::{ClusterSummary, MirroredResource};
    use axum::{
        body::Body,
        http::{HeaderMap, Request, StatusCode},
    };
    use cluster_registry::karmada::{ClusterStatus, NodeSummary};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use serde_json::json;
    use tower::ServiceExt;

    /// One member `m1` with Deployments mirrored, two Nodes of which one is Ready.
    pub(crate) struct FakeClusters;

    pub(crate) fn m1() -> ClusterSummary {
        ClusterSummary {
            name: "m1".into(),
            status: ClusterStatus {
                conditions: vec![Condition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    reason: "ClusterReady".into(),
                    message: "cluster is healthy and ready to accept workloads".into(),
                    last_transition_time: Time("2025-01-01T00:00:00Z".parse().unwrap()),
                    observed_generation: None,
                }],
                kubernetes_version: Some("v1.34.1".into()),
                node_summary: Some(NodeSummary {
                    total_num: Some(2),
                    ready_num: Some(1),
                }),
            },
            resources: vec!["apps/v1/deployments".into()],
        }
    }

    impl ClusterReader for FakeClusters {
        fn clusters(&self) -> Vec<ClusterSummary> {
            vec![m1()]
        }
        fn cluster(&self, name: &str) -> Option<ClusterSummary> {
            (name == "m1").then(m1)
        }
        fn objects(
            &self,
            name: &str,
            resource: &MirroredResource,
        ) -> Option<Vec<serde_json::Value>> {
            let deployments: MirroredResource = "apps/v1/deployments".parse().unwrap();
            (name == "m1" && *resource == deployments)
                .then(|| vec![json!({"metadata": {"name": "web", "namespace": "default"}})])
        }
    }

    pub(crate) fn state() -> HttpState {
        HttpState {
            metrics: Metrics::new(),
            readiness: Readiness::default(),
            clusters: Arc::new(FakeClusters),
            shard: None,
        }
    }

    /// Sends `GET uri` through the open router (no access gate), without a socket.
    pub(crate) async fn get(state: &HttpState, uri: &str) -> (StatusCode, HeaderMap, String) {
        let open = router(state.clone(), None, ServerLimits::default().request_timeout);
        send(open, Request::get(uri).body(Body::empty()).unwrap()).await
    }

    /// Sends `request` through `router`, without a socket.
    pub(crate) async fn send(
        router: Router,
        request: Request<Body>,
    ) -> (StatusCode, HeaderMap, String) {
        let (parts, body) = router.oneshot(request).await.unwrap().into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        (parts.status, parts.headers, text)
    }

    #[tokio::test]
    async fn unknown_route_is_404() {
        let (status, _, _) = get(&state(), "/nope").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}
