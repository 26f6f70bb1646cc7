//! [`AccessGate`]: the reviews, bounded by a deadline and cached under a hash of the token.

use std::{future::Future, sync::Arc, time::Duration};

use moka::future::Cache;
use ring::digest::{Context, SHA256};
use secrecy::{ExposeSecret as _, SecretString};

use super::{
    ANSWER_TTL, AccessReview, MAX_ANSWERS, MAX_REVIEWS_IN_FLIGHT, ReviewConfig, ReviewError, User,
    budget::{OverBudget, ReviewBudget},
};

/// A SHA-256: the cache key standing for a token (with the path, for decisions).
type Digest = [u8; 32];

/// What the gate decided for one request.
#[derive(Debug)]
pub(crate) enum Access {
    /// The token is accepted and its identity may `get` the path.
    Allowed,
    /// The control plane does not accept the token (401).
    Unauthenticated,
    /// The token is accepted; its identity may not `get` the path (403).
    Forbidden {
        /// Whose request was refused, for the logs.
        user: String,
    },
    /// A review failed or timed out: fail closed (503), or was over the review budget (429).
    Unavailable(Arc<ReviewError>),
}

/// Asks [`AccessReview`] and remembers the answers for [`ANSWER_TTL`].
///
/// # Concurrent calls
/// Cloning is cheap (handles only) and no lock is held: concurrent requests with the same token
/// (and path) wait for one review and share its answer or its failure; failures are not cached,
/// so the next request asks again. An answer can be up to that long stale: a revoked binding or
/// token keeps working that long, as with kube-rbac-proxy's caches.
///
/// Only the questions not answered from the caches reach the control plane, and only within
/// the [`ReviewBudget`] ([`ReviewConfig::rate`], [`ReviewConfig::burst`],
/// [`MAX_REVIEWS_IN_FLIGHT`]); beyond it the request is refused at once
/// ([`ReviewError::OverBudget`]) rather than queued.
///
/// ## Memory usage
/// At most [`MAX_ANSWERS`] identities and as many decisions, keyed by 32-byte digests.
#[derive(Clone)]
pub(crate) struct AccessGate {
    review: Arc<dyn AccessReview>,
    users: Cache<Digest, Option<User>>,
    decisions: Cache<Digest, bool>,
    deadline: Duration,
    budget: ReviewBudget,
}

impl AccessGate {
    /// A gate asking `review`, configured by `config`.
    pub(crate) fn new(review: Arc<dyn AccessReview>, config: &ReviewConfig) -> Self {
        Self {
            review,
            users: bounded_cache(),
            decisions: bounded_cache(),
            deadline: config.deadline,
            budget: ReviewBudget::new(config.rate, config.burst, MAX_REVIEWS_IN_FLIGHT),
        }
    }

    /// Whether the holder of `token` may `get` `path`.
    pub(crate) async fn check(&self, token: &SecretString, path: &str) -> Access {
        let token_key = digest(&[token.expose_secret().as_bytes()]);
        let authenticate = self.bounded("TokenReview", self.review.authenticate(token));
        let user = match self.users.try_get_with(token_key, authenticate).await {
            Ok(Some(user)) => user,
            Ok(None) => return Access::Unauthenticated,
            Err(err) => return Access::Unavailable(err),
        };
        // Length-prefixed, so that no (token, path) pair collides with another by construction.
        let decision_key = digest(&[&token_key, &path.len().to_be_bytes(), path.as_bytes()]);
        let authorize = self.bounded("SubjectAccessReview", self.review.authorize(&user, path));
        match self.decisions.try_get_with(decision_key, authorize).await {
            Ok(true) => Access::Allowed,
            Ok(false) => Access::Forbidden { user: user.name },
            Err(err) => Access::Unavailable(err),
        }
    }

    /// `answer` or, once the deadline passes, [`ReviewError::Timeout`]; not asked at all, and
    /// [`ReviewError::OverBudget`], when the budget has no room for it.
    async fn bounded<T>(
        &self,
        review: &'static str,
        answer: impl Future<Output = Result<T, ReviewError>>,
    ) -> Result<T, ReviewError> {
        let (budget, deadline) = (&self.budget, self.deadline);
        let _slot = budget.try_start().map_err(|over| ReviewError::OverBudget {
            review,
            in_flight: over == OverBudget::InFlight,
            retry_after: budget.retry_after(),
        })?;
        tokio::time::timeout(deadline, answer)
            .await
            .map_err(|_| ReviewError::Timeout { review, deadline })?
    }
}

impl std::fmt::Debug for AccessGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessGate")
            .field("identities", &self.users.entry_count())
            .field("decisions", &self.decisions.entry_count())
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

fn bounded_cache<V: Clone + Send + Sync + 'static>() -> Cache<Digest, V> {
    Cache::builder()
        .max_capacity(MAX_ANSWERS)
        .time_to_live(ANSWER_TTL)
        .build()
}

fn digest(parts: &[&[u8]]) -> Digest {
    let mut context = Context::new(&SHA256);
    for part in parts {
        context.update(part);
    }
    let mut out = [0; 32];
    out.copy_from_slice(context.finish().as_ref());
    out
}
