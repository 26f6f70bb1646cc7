//! `/metrics`.

use axum::{
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};

use super::HttpState;

/// The content type of OpenMetrics text 1.0, which `prometheus_client` writes.
pub(super) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric family as OpenMetrics text.
pub(super) async fn metrics(State(state): State<HttpState>) -> Response {
    match state.metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response(),
        Err(err) => {
            tracing::error!(error = %err, "encoding metrics failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "encoding metrics failed").into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{get, state};
    use super::OPENMETRICS;
    use axum::http::{StatusCode, header};
    use member_client::CredentialHealth;

    #[tokio::test]
    async fn metrics_are_openmetrics_text() {
        let state = state();
        state.metrics.watch_member("m1", CredentialHealth::new());
        state.metrics.record_relist("m1", "apps/v1/deployments");
        let (status, headers, body) = get(&state, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::CONTENT_TYPE], OPENMETRICS);
        let relists = r#"tether_relists_total{member="m1",resource="apps/v1/deployments"} 1"#;
        assert!(body.lines().any(|l| l == relists), "{body}");
        assert!(body.ends_with("# EOF\n"), "{body}");
    }
}
