//! `/healthz` (liveness) and `/readyz` (readiness).

use axum::{extract::State, http::StatusCode};

use super::HttpState;
use crate::readiness::ReadyState;

/// Answers while the process serves at all. It checks nothing else on purpose: a failing
/// liveness probe restarts the pod, and a restart does not fix a member that is down.
pub(super) async fn healthz() -> &'static str {
    "ok"
}

/// 200 only in [`ReadyState::Ready`]; otherwise 503 with why, for `kubectl describe`.
pub(super) async fn readyz(State(state): State<HttpState>) -> (StatusCode, String) {
    match state.readiness.state() {
        ReadyState::Ready => (StatusCode::OK, "ok".to_owned()),
        ReadyState::Starting => (StatusCode::SERVICE_UNAVAILABLE, "starting".to_owned()),
        ReadyState::NotReady { reason } => (StatusCode::SERVICE_UNAVAILABLE, reason),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{get, state};
    use axum::http::StatusCode;

    #[tokio::test]
    async fn healthz_is_ok_whatever_the_readiness() {
        let state = state();
        state
            .readiness
            .mark_not_ready("control-plane credential is rejected");
        let (status, _, body) = get(&state, "/healthz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
    }

    #[tokio::test]
    async fn readyz_flips_from_503_to_200_and_back() {
        let state = state();
        let (status, _, body) = get(&state, "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "starting")
        );

        state.readiness.mark_ready();
        let (status, _, body) = get(&state, "/readyz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));

        state
            .readiness
            .mark_not_ready("control-plane credential is rejected");
        let (status, _, body) = get(&state, "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "control-plane credential is rejected"
            )
        );
    }
}
