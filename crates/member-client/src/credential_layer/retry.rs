//! What a member client does after a 401 or a busy member's answer: the slow path of
//! [`Bearer`](super::Bearer), kept out of the future every request allocates.

use std::sync::Arc;

use http::{Request, Response, StatusCode};
use kube::client::{Body, retry::RetryPolicy};
use tokio::time::Instant;
use tower::{BoxError, Service, ServiceExt as _, retry::Policy};

use super::{Ctx, authorize, replayable};
use crate::Credential;

/// After `response` to a request sent with `credential`: a 401 refreshes the credential and
/// sends `replay` once more; a 429/503/504 is retried as kube would, within the budget.
pub(super) async fn retry<S, B>(
    ctx: Arc<Ctx>,
    mut inner: S,
    mut replay: Option<Request<Body>>,
    mut response: Response<B>,
    mut credential: Arc<Credential>,
) -> Result<Response<B>, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    let mut refreshed = false;
    let mut server_retry = None;
    loop {
        if response.status() == StatusCode::UNAUTHORIZED {
            ctx.health.count_unauthorized();
            if refreshed {
                ctx.tokens
                    .invalidate_if_current(&ctx.secret, &credential)
                    .await;
                return Err(ctx.rejected());
            }
            let fresh = ctx.refresh(&credential).await?;
            if fresh.same_material(&credential) {
                return Err(ctx.rejected());
            }
            if replay.is_none() {
                tracing::debug!(member = %ctx.member, "401 on a streaming body; not replayed");
                return Ok(response);
            }
            (refreshed, credential) = (true, fresh);
            ctx.health.count_retry();
            tracing::debug!(member = %ctx.member, secret = %ctx.secret, "retrying once with a refreshed token");
        } else {
            let (Some(budget), Some(copy)) = (ctx.server_retries, replay.as_mut()) else {
                ctx.observe(response.status());
                return Ok(response);
            };
            let (policy, first) =
                server_retry.get_or_insert_with(|| (RetryPolicy::server_retry(), Instant::now()));
            let mut result = Ok(response);
            let wait = Policy::<_, _, BoxError>::retry(policy, copy, &mut result);
            response = result?;
            match wait {
                Some(wait) if wait.deadline() <= *first + budget => wait.await,
                _ => {
                    ctx.observe(response.status());
                    return Ok(response);
                }
            }
        }
        let Some(next) = replay.take() else {
            return Ok(response);
        };
        drop(response);
        replay = replayable(&next);
        response = call(&mut inner, next, &credential).await?;
    }
}

/// Sends `request` with `credential` once `inner` is ready (below it, a slot under the
/// member's in-flight limit is free).
async fn call<S, B>(
    inner: &mut S,
    request: Request<Body>,
    credential: &Credential,
) -> Result<Response<B>, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    let ready = inner.ready().await.map_err(Into::into)?;
    ready
        .call(authorize(request, credential))
        .await
        .map_err(Into::into)
}
