//! `/healthz` (liveness), `/readyz` (readiness, open to anyone, so it says little) and
//! `/api/v1/readiness` (the full reason, behind the access gate).

use axum::{Json, extract::State, http::StatusCode};

use super::HttpState;
use crate::readiness::ReadyState;

/// The longest short reason `/readyz` shows.
const SHORT_REASON_CHARS: usize = 80;

/// Answers while the process serves at all. It checks nothing else on purpose: a failing
/// liveness probe restarts the pod, and a restart does not fix a member that is down.
pub(super) async fn healthz() -> &'static str {
    "ok"
}

/// 200 only in [`ReadyState::Ready`]; otherwise 503 with a short reason for `kubectl
/// describe`. Anyone can ask, so the details (source paths, identities, the apiserver's RBAC
/// message) are left out: they are in the logs and in `/api/v1/readiness`.
pub(super) async fn readyz(State(state): State<HttpState>) -> (StatusCode, String) {
    match state.readiness.state() {
        ReadyState::Ready => (StatusCode::OK, "ok".to_owned()),
        ReadyState::Starting => (StatusCode::SERVICE_UNAVAILABLE, "starting".to_owned()),
        ReadyState::NotReady { reason } => (StatusCode::SERVICE_UNAVAILABLE, short(&reason)),
    }
}

/// Readiness with its full reason, for callers the access gate lets in.
pub(super) async fn readiness(State(state): State<HttpState>) -> Json<serde_json::Value> {
    let (ready, reason) = match state.readiness.state() {
        ReadyState::Ready => (true, None),
        ReadyState::Starting => (false, Some("starting".to_owned())),
        ReadyState::NotReady { reason } => (false, Some(reason)),
    };
    Json(serde_json::json!({ "ready": ready, "reason": reason }))
}

/// The summary of a readiness reason: reasons are written `<summary>: <details>`, and only the
/// summary, a fixed phrase of the collector's own, is public. Bounded and printable whatever
/// the reason holds.
fn short(reason: &str) -> String {
    let summary = reason.split(':').next().unwrap_or_default();
    summary
        .chars()
        .filter(|c| !c.is_control())
        .take(SHORT_REASON_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{
        HttpState,
        tests::{get, state},
    };
    use axum::http::StatusCode;

    const REJECTED: &str = "control-plane credential is rejected";

    /// The status code and body of `GET uri`, as `<code> <body>`.
    async fn answer(state: &HttpState, uri: &str) -> String {
        let (status, _, body) = get(state, uri).await;
        format!("{} {body}", status.as_u16())
    }

    #[tokio::test]
    async fn healthz_is_ok_whatever_the_readiness() {
        let state = state();
        state.readiness.mark_not_ready(REJECTED);
        assert_eq!(answer(&state, "/healthz").await, "200 ok");
    }

    #[tokio::test]
    async fn readyz_flips_from_503_to_200_and_back() {
        let state = state();
        assert_eq!(answer(&state, "/readyz").await, "503 starting");
        state.readiness.mark_ready();
        assert_eq!(answer(&state, "/readyz").await, "200 ok");
        state.readiness.mark_not_ready(REJECTED);
        assert_eq!(answer(&state, "/readyz").await, format!("503 {REJECTED}"));
    }

    #[tokio::test]
    async fn readyz_hides_identities_and_rbac_messages_which_readiness_shows() {
        let state = state();
        let full = "member definitions are not listed: Karmada Clusters: clusters.cluster.karmada.io \
                    is forbidden: User \"system:serviceaccount:tether-system:tether-collector\" \
                    cannot list resource \"clusters\"";
        state.readiness.mark_not_ready(full);
        let short = answer(&state, "/readyz").await;
        assert_eq!(short, "503 member definitions are not listed");
        let (status, _, body) = get(&state, "/api/v1/readiness").await;
        assert_eq!(status, StatusCode::OK);
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body, serde_json::json!({"ready": false, "reason": full}));
    }

    #[test]
    fn a_short_reason_is_bounded_and_printable() {
        let reason = format!("{}\n\u{1b}[31m", "x".repeat(500));
        let short = super::short(&reason);
        assert_eq!(short, "x".repeat(super::SHORT_REASON_CHARS));
        assert_eq!(super::short("a\r\nb: c"), "ab");
    }
}
