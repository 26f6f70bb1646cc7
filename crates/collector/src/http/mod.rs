//! The collector's HTTP surface: `/healthz`, `/readyz`, `/metrics` and a read API over the
//! mirrored member clusters.

mod api;
mod health;
mod metrics;

use std::{future::Future, io, sync::Arc};

use axum::{Router, routing::get};
use tokio::net::TcpListener;

pub(crate) use api::ClusterReader;

use crate::{metrics::Metrics, readiness::Readiness};

/// What the handlers read. Every field is a cheap handle, so cloning per request is cheap.
#[derive(Clone)]
pub(crate) struct HttpState {
    /// Encoded by `/metrics`.
    pub(crate) metrics: Metrics,
    /// Reported by `/readyz`.
    pub(crate) readiness: Readiness,
    /// Served by `/api/v1/clusters…`.
    pub(crate) clusters: Arc<dyn ClusterReader>,
}

/// Every route, over `state`.
///
/// | route | answer |
/// | --- | --- |
/// | `GET /healthz` | 200 `ok` while the process serves (liveness) |
/// | `GET /readyz` | 200 `ok` when ready, else 503 with the reason |
/// | `GET /metrics` | OpenMetrics text |
/// | `GET /api/v1/clusters` | JSON list of [`ClusterSummary`] |
/// | `GET /api/v1/clusters/{name}` | one [`ClusterSummary`], or 404 |
/// | `GET /api/v1/clusters/{name}/{group}/{version}/{resource}` | `{"items": [...]}`, or 404 |
pub(crate) fn router(state: HttpState) -> Router {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::metrics))
        .route("/api/v1/clusters", get(api::list_clusters))
        .route("/api/v1/clusters/{name}", get(api::get_cluster))
        .route(
            "/api/v1/clusters/{name}/{group}/{version}/{resource}",
            get(api::list_objects),
        )
        .with_state(state)
}

/// Serves `router` on `listener` until `shutdown` completes, then finishes the requests in
/// flight and returns.
///
/// # Errors
/// Never in practice: axum retries failed accepts. The `io::Result` is axum's signature.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
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
            readiness: Readiness::new(),
            clusters: Arc::new(FakeClusters),
        }
    }

    /// Sends `GET uri` through the router, without a socket.
    pub(crate) async fn get(state: &HttpState, uri: &str) -> (StatusCode, HeaderMap, String) {
        let request = Request::get(uri).body(Body::empty()).unwrap();
        let response = router(state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, headers, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn unknown_route_is_404() {
        let (status, _, _) = get(&state(), "/nope").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn serve_answers_on_the_socket_and_returns_after_shutdown() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, router(state()), async {
            let _ = stopped.await;
        }));

        // A blocking client keeps the test free of an HTTP client dependency.
        let response = tokio::task::spawn_blocking(move || {
            use std::io::{Read, Write};
            let mut stream = std::net::TcpStream::connect(addr)?;
            stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
            let mut response = String::new();
            stream.read_to_string(&mut response)?;
            Ok::<_, std::io::Error>(response)
        })
        .await
        .unwrap()
        .unwrap();
        assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
        assert!(response.ends_with("\r\n\r\nok"), "{response}");

        stop.send(()).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), server)
            .await
            .expect("serve did not return after shutdown")
            .unwrap()
            .unwrap();
    }
}
