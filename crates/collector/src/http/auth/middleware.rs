//! The axum middleware that puts [`AccessGate`] in front of the protected routes.

use axum::{
    Json,
    extract::{Request, State},
    http::{
        HeaderValue, StatusCode,
        header::{RETRY_AFTER, WWW_AUTHENTICATE},
    },
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{Access, AccessGate, ReviewError, bearer::bearer_token};

/// Read API paths are reviewed under this prefix: Kubernetes' default `system:discovery`
/// ClusterRole grants every authenticated identity `get` on `/api/*` (the apiserver's own
/// discovery), so reviewing `/api/v1/clusters` as is would let anyone with any token read
/// member data. `/metrics` is reviewed as is, so the grants scrapers already hold apply.
pub(crate) const API_REVIEW_PREFIX: &str = "/tether";

/// The non-resource URL a SubjectAccessReview asks about for a request to `path`.
pub(crate) fn reviewed_path(path: &str) -> String {
    if path.starts_with("/api/") {
        format!("{API_REVIEW_PREFIX}{path}")
    } else {
        path.to_owned()
    }
}

/// Lets the request through only when [`AccessGate::check`] allows it; otherwise answers 401,
/// 403, 429 or 503 with `{"error": "<short reason>"}`. Neither the token nor the identity is echoed.
pub(crate) async fn require_access(
    State(gate): State<AccessGate>,
    request: Request,
    next: Next,
) -> Response {
    let path = reviewed_path(request.uri().path());
    let token = match bearer_token(request.headers()) {
        Ok(token) => token,
        Err(why) => {
            tracing::debug!(%path, reason = %why, "read API request without a usable token");
            return unauthenticated();
        }
    };
    match gate.check(&token, &path).await {
        Access::Allowed => next.run(request).await,
        Access::Unauthenticated => {
            tracing::debug!(%path, "read API token not accepted by the control plane");
            unauthenticated()
        }
        Access::Forbidden { user } => {
            tracing::debug!(%path, %user, "read API request forbidden by RBAC");
            refusal(StatusCode::FORBIDDEN, "forbidden")
        }
        Access::Unavailable(err) => match *err {
            ReviewError::OverBudget { retry_after, .. } => {
                // At debug: a flood of random tokens would otherwise flood the log as well.
                tracing::debug!(%path, error = %err, "read API request over the review budget: 429");
                let mut response =
                    refusal(StatusCode::TOO_MANY_REQUESTS, "too many access reviews");
                let seconds = HeaderValue::from(retry_after.as_secs().max(1));
                response.headers_mut().insert(RETRY_AFTER, seconds);
                response
            }
            _ => {
                tracing::warn!(%path, error = %err, source = ?std::error::Error::source(&*err).map(ToString::to_string), "read API access review failed; answering 503");
                refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the access review did not complete",
                )
            }
        },
    }
}

fn unauthenticated() -> Response {
    let mut response = refusal(StatusCode::UNAUTHORIZED, "unauthorized");
    let challenge = HeaderValue::from_static(r#"Bearer realm="tether""#);
    response.headers_mut().insert(WWW_AUTHENTICATE, challenge);
    response
}

fn refusal(status: StatusCode, message: &'static str) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}
