//! The gate in front of the routes, with a fake control plane.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    body::Body,
    http::{Request, StatusCode, header},
};
use secrecy::{ExposeSecret as _, SecretString};

use super::{AccessGate, AccessReview, ReviewConfig, ReviewError, User};
use crate::http::{
    router,
    tests::{send, state},
};

/// Accepts `reader` (may get `/api/v1/clusters`, reviewed as `/tether/api/v1/clusters`, and
/// `/metrics`) and `stranger` (may get only what Kubernetes grants every identity, such as
/// `/api/*`); `slow` never gets an answer. Counts the reviews it answers.
#[derive(Default)]
struct FakeControlPlane {
    token_reviews: AtomicUsize,
    access_reviews: AtomicUsize,
}

impl FakeControlPlane {
    /// The TokenReviews and the access reviews it answered.
    fn reviews(&self) -> (usize, usize) {
        (
            self.token_reviews.load(Ordering::SeqCst),
            self.access_reviews.load(Ordering::SeqCst),
        )
    }
}

#[async_trait::async_trait]
impl AccessReview for FakeControlPlane {
    async fn authenticate(&self, token: &SecretString) -> Result<Option<User>, ReviewError> {
        self.token_reviews.fetch_add(1, Ordering::SeqCst);
        let name = match token.expose_secret() {
            "reader" | "stranger" => token.expose_secret().to_owned(),
            "slow" => return std::future::pending().await,
            _ => return Ok(None),
        };
        Ok(Some(User {
            name,
            ..User::default()
        }))
    }

    async fn authorize(&self, user: &User, path: &str) -> Result<bool, ReviewError> {
        self.access_reviews.fetch_add(1, Ordering::SeqCst);
        // As Kubernetes' default `system:discovery` role does for every authenticated identity.
        if path.starts_with("/api/") {
            return Ok(true);
        }
        Ok(user.name == "reader" && matches!(path, "/tether/api/v1/clusters" | "/metrics"))
    }
}

const DEADLINE: Duration = Duration::from_millis(200);

fn gated() -> (Arc<FakeControlPlane>, axum::Router) {
    gated_with(&ReviewConfig {
        deadline: DEADLINE,
        ..ReviewConfig::default()
    })
}

fn gated_with(config: &ReviewConfig) -> (Arc<FakeControlPlane>, axum::Router) {
    let fake = Arc::new(FakeControlPlane::default());
    let gate = AccessGate::new(fake.clone(), config);
    let router = router(state(), Some(gate), Duration::from_secs(10));
    (fake, router)
}

/// The status of `GET /api/v1/clusters` with bearer token `token`.
async fn clusters_status(router: &axum::Router, token: &str) -> StatusCode {
    let authorization = format!("Bearer {token}");
    let (status, _) = get(router, "/api/v1/clusters", Some(&authorization)).await;
    status
}

async fn get(
    router: &axum::Router,
    uri: &str,
    authorization: Option<&str>,
) -> (StatusCode, String) {
    let mut request = Request::get(uri);
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    let (status, headers, body) = send(router.clone(), request.body(Body::empty()).unwrap()).await;
    if status == StatusCode::UNAUTHORIZED {
        assert_eq!(
            headers[header::WWW_AUTHENTICATE],
            r#"Bearer realm="tether""#
        );
    }
    (status, body)
}

#[tokio::test]
async fn an_allowed_identity_reads_the_api_and_the_metrics() {
    let (_, router) = gated();
    for path in ["/api/v1/clusters", "/metrics"] {
        let (status, _) = get(&router, path, Some("Bearer reader")).await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn an_accepted_token_without_the_grant_is_403_not_401() {
    let (_, router) = gated();
    let (status, body) = get(&router, "/api/v1/clusters", Some("Bearer stranger")).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::FORBIDDEN, r#"{"error":"forbidden"}"#)
    );
    // The grant is per path.
    let (status, _) = get(&router, "/api/v1/clusters/m1", Some("Bearer reader")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn no_token_or_a_rejected_token_is_401_and_never_echoed() {
    let (fake, router) = gated();
    let (status, _) = get(&router, "/api/v1/clusters", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = get(&router, "/metrics", Some("Basic cmVhZGVyOg==")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(fake.reviews().0, 0, "nothing to review");

    let (status, body) = get(&router, "/metrics", Some("Bearer s3cr3t-bad-token")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!body.contains("s3cr3t"), "{body}");
    assert_eq!(fake.reviews().1, 0, "no identity to authorize");
}

#[tokio::test]
async fn health_and_unknown_paths_need_no_token() {
    let (fake, router) = gated();
    for (path, want) in [
        ("/healthz", StatusCode::OK),
        ("/readyz", StatusCode::SERVICE_UNAVAILABLE),
        ("/nope", StatusCode::NOT_FOUND),
    ] {
        assert_eq!(get(&router, path, None).await.0, want, "{path}");
    }
    assert_eq!(fake.reviews().0, 0);
}

#[tokio::test]
async fn answers_are_cached_per_token_and_per_path() {
    let (fake, router) = gated();
    for _ in 0..3 {
        for (token, want) in [
            ("reader", StatusCode::OK),
            ("nobody", StatusCode::UNAUTHORIZED),
            ("stranger", StatusCode::FORBIDDEN),
        ] {
            assert_eq!(clusters_status(&router, token).await, want, "{token}");
        }
    }
    let once_each = "one per token, one per identity and path";
    assert_eq!(fake.reviews(), (3, 2), "{once_each}");
    let (status, _) = get(&router, "/metrics", Some("Bearer reader")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fake.reviews(), (3, 3), "a new path is reviewed");
}

#[tokio::test]
async fn a_control_plane_that_does_not_answer_gives_503_by_the_deadline() {
    let (fake, router) = gated();
    let started = tokio::time::Instant::now();
    let (status, body) = tokio::time::timeout(
        Duration::from_secs(5),
        get(&router, "/api/v1/clusters", Some("Bearer slow")),
    )
    .await
    .expect("the gate hung past its deadline");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(!body.contains("slow"), "{body}");
    assert!(started.elapsed() >= DEADLINE);
    // A failure is not cached: the next request asks again.
    let _ = get(&router, "/api/v1/clusters", Some("Bearer slow")).await;
    assert_eq!(fake.reviews().0, 2);
}

#[tokio::test]
async fn reviews_beyond_the_budget_are_refused_at_once_and_cached_answers_still_serve() {
    let (fake, router) = gated_with(&ReviewConfig {
        deadline: DEADLINE,
        rate: 0.001,
        burst: 3,
    });
    // One TokenReview and one SubjectAccessReview: two of the three.
    assert_eq!(clusters_status(&router, "reader").await, StatusCode::OK);
    let status = clusters_status(&router, "random-0").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    for n in 1..50 {
        let request = Request::get("/api/v1/clusters")
            .header(header::AUTHORIZATION, format!("Bearer random-{n}"));
        let (status, headers, body) =
            send(router.clone(), request.body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{n}: {body}");
        assert_eq!(headers[header::RETRY_AFTER], "60");
        assert!(!body.contains("random"), "{body}");
    }
    let nothing_beyond = "the control plane saw nothing beyond the budget";
    assert_eq!(fake.reviews().0, 2, "{nothing_beyond}");
    let status = clusters_status(&router, "reader").await;
    assert_eq!(status, StatusCode::OK, "a cached answer needs no review");
}
