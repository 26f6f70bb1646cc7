//! Who may read `/api/...` and `/metrics`: the caller's bearer token is checked against the
//! control plane with a TokenReview, then the caller's identity with a SubjectAccessReview for
//! the request path as a non-resource URL and verb `get`, the way kube-rbac-proxy and
//! controller-runtime's authenticated metrics filter do. Read API paths are reviewed under
//! `/tether` (`/tether/api/v1/clusters`): Kubernetes' default `system:discovery` role already
//! grants `/api/*` to every authenticated identity.
//!
//! | outcome | status |
//! | --- | --- |
//! | no token, a malformed `Authorization` header, or a token the control plane does not accept | 401 |
//! | a token it accepts whose identity may not `get` the path | 403 |
//! | the control plane not answering a review within the deadline, or failing it | 503 (fail closed) |
//! | a review needed beyond the review budget (rate, burst, reviews in flight) | 429 with `Retry-After` (fail closed) |
//!
//! The answers are cached briefly ([`ReviewConfig`]) under a SHA-256 of the token, so that the
//! raw token is never stored; failures are not cached. The token is never logged or echoed.
//! Reviews go through a control-plane client of their own (`ControlPlane::reviews`), so that
//! however many callers wait for one, the Lease renewals and status writes on the main client
//! wait behind none of them.

mod bearer;
mod budget;
mod gate;
mod kube_review;
mod middleware;
#[cfg(test)]
mod tests;

use std::{collections::BTreeMap, time::Duration};

use secrecy::SecretString;

pub(crate) use gate::{Access, AccessGate};
pub(crate) use kube_review::KubeAccessReview;
pub(crate) use middleware::require_access;

/// An identity the control plane vouched for in a TokenReview: what a SubjectAccessReview asks
/// about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct User {
    /// `system:serviceaccount:<ns>:<name>`, a user name, …
    pub(crate) name: String,
    /// The identity's UID, when the authenticator gives one.
    pub(crate) uid: Option<String>,
    /// Its groups.
    pub(crate) groups: Vec<String>,
    /// Authenticator-specific attributes (scopes, the pod a token is bound to, …).
    pub(crate) extra: BTreeMap<String, Vec<String>>,
}

/// The two questions asked of the control plane. A trait so that tests can answer them.
///
/// # Concurrent calls
/// Called from request handlers on any worker; [`AccessGate`] bounds each call by a deadline
/// and merges concurrent identical questions into one.
#[async_trait::async_trait]
pub(crate) trait AccessReview: Send + Sync + 'static {
    /// TokenReview: whose `token` this is, or `None` when the control plane does not accept it.
    async fn authenticate(&self, token: &SecretString) -> Result<Option<User>, ReviewError>;
    /// SubjectAccessReview: whether `user` may `get` the non-resource URL `path`.
    async fn authorize(&self, user: &User, path: &str) -> Result<bool, ReviewError>;
}

/// Why a review has no answer. The caller gets 503; the detail goes to the logs only.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReviewError {
    /// The control plane did not answer within the deadline. Retryable.
    #[error("the control plane did not answer the {review} within {deadline:?}")]
    Timeout {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
        /// The deadline that passed.
        deadline: Duration,
    },
    /// More reviews were needed than the budget allows ([`ReviewConfig::rate`],
    /// [`ReviewConfig::burst`], [`MAX_REVIEWS_IN_FLIGHT`]); nothing was asked. The
    /// caller gets 429.
    #[error("the {review} is over the access-review budget ({})",
        if *in_flight { "reviews in flight" } else { "rate" })]
    OverBudget {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
        /// Over the cap on reviews in flight, rather than the rate.
        in_flight: bool,
        /// When to ask again.
        retry_after: Duration,
    },
    /// The control plane refused or failed the review (for instance the collector may not
    /// create reviews: its RBAC lacks `tokenreviews`/`subjectaccessreviews` `create`).
    #[error("the control plane failed the {review}")]
    Failed {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
}

/// How the gate bounds reviews.
#[derive(Clone, Debug)]
pub(crate) struct ReviewConfig {
    /// How long one review may take before the caller gets 503.
    pub(crate) deadline: Duration,
    /// Reviews a second the collector asks for, on average (`--access-review-rate`).
    pub(crate) rate: f64,
    /// Reviews it may ask for at once beyond the rate (`--access-review-burst`).
    pub(crate) burst: u32,
}

/// How long an answer (positive or negative) is reused. Short, so that a revoked binding or
/// token stops working soon.
pub(crate) const ANSWER_TTL: Duration = Duration::from_secs(10);
/// The most answers kept per cache (identities, decisions).
pub(crate) const MAX_ANSWERS: u64 = 4096;
/// The default [`ReviewConfig::rate`].
pub(crate) const DEFAULT_REVIEW_RATE: f64 = 20.0;
/// The default [`ReviewConfig::burst`].
pub(crate) const DEFAULT_REVIEW_BURST: u32 = 40;
/// Reviews waiting for the control plane at once, and the review client's in-flight limit.
pub(crate) const MAX_REVIEWS_IN_FLIGHT: usize = 16;

impl Default for ReviewConfig {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(5),
            rate: DEFAULT_REVIEW_RATE,
            burst: DEFAULT_REVIEW_BURST,
        }
    }
}
