//! One mint: a TokenRequest on the member with its current credential, and a
//! SelfSubjectReview with the new token before it goes anywhere.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use cluster_registry::minting::MintRequest;
use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::ServiceAccount,
};
use kube::{Api, Client, api::PostParams};
use member_client::{
    ClientFactory, Credential, CredentialCache, CredentialCacheConfig, CredentialHealth,
    CredentialKey, CredentialSource, FailureKind, MemberClientConfig, SourceError, text::Text,
    validation::EndpointPolicy,
};
use secrecy::{ExposeSecret as _, SecretString};

use crate::check::probe::whoami;

/// Why a mint gave no token that may be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MintError {
    /// The member refused the TokenRequest (403): the current credential may not `create`
    /// `serviceaccounts/token` for the ServiceAccount.
    #[error("the member refused the TokenRequest for {account} (403): {message}")]
    Refused {
        /// `namespace/name`.
        account: String,
        /// The apiserver's message.
        message: Text,
    },
    /// The member rejected the current credential (401).
    #[error("the member rejected the current token (401), so it can mint nothing")]
    Unauthorized,
    /// The new token authenticates as someone else, or not at all.
    #[error("the minted token {0}; it was not written")]
    NotVerified(String),
    /// The current token is not the named ServiceAccount's.
    #[error("{0}")]
    WrongIdentity(String),
    /// The minted token names another ServiceAccount or issuer than the current one.
    #[error("{}", .0.message)]
    Mismatch(super::state::Refusal),
    /// Anything else: not found, unreachable, a timeout, an answer without a token.
    #[error("{0}")]
    Failed(Text),
}

/// Checks that the current credential, which `client` carries, authenticates as `user`: a
/// definition naming another ServiceAccount than the one its token belongs to would otherwise
/// switch the member to another identity, with other permissions.
pub(crate) async fn check_current(
    client: &Client,
    user: &str,
    deadline: Duration,
) -> Result<(), MintError> {
    let seen = user_of(client, deadline).await;
    let unchecked = |why: String| format!("the current token could not be checked: {why}");
    let seen = seen.map_err(|why| MintError::Failed(Text::new(&unchecked(why))))?;
    if seen == user {
        return Ok(());
    }
    Err(MintError::WrongIdentity(format!(
        "the current token authenticates as {seen:?}, not as the ServiceAccount the definition \
         names ({user:?}); nothing was minted"
    )))
}

/// Who `client`'s credential authenticates as on the member (a SelfSubjectReview), or why
/// the review gave no answer within `deadline`.
async fn user_of(client: &Client, deadline: Duration) -> Result<String, String> {
    let seen = tokio::time::timeout(deadline, whoami(client))
        .await
        .map_err(|_| format!("the SelfSubjectReview took over {deadline:?}"))?;
    match seen.error {
        Some(error) => Err(format!("the SelfSubjectReview failed: {error}")),
        None => Ok(seen.user.unwrap_or_default()),
    }
}

/// Asks the member, through `client` (which carries the current credential), for a token of
/// the ServiceAccount `request` names.
pub(crate) async fn request_token(
    client: &Client,
    request: &MintRequest,
    deadline: Duration,
) -> Result<SecretString, MintError> {
    let account = &request.service_account;
    let token_request = TokenRequest {
        spec: Some(TokenRequestSpec {
            // None: the apiserver's own audience.
            audiences: (!request.audiences.is_empty()).then(|| request.audiences.clone()),
            expiration_seconds: Some(request.expiration_seconds),
            bound_object_ref: None,
        }),
        ..TokenRequest::default()
    };
    let api = Api::<ServiceAccount>::namespaced(client.clone(), &account.namespace);
    let params = PostParams::default();
    let asked = api.create_token_request(&account.name, &params, &token_request);
    let late = format!("the TokenRequest took over {deadline:?}");
    let answer = tokio::time::timeout(deadline, asked).await;
    let answer = answer.map_err(|_| MintError::Failed(Text::new(&late)))?;
    match answer {
        Ok(answer) => answer
            .status
            .and_then(|status| status.token)
            .filter(|token| !token.trim().is_empty())
            .map(SecretString::from)
            .ok_or_else(|| MintError::Failed(Text::new("the TokenRequest answer holds no token"))),
        Err(err) => Err(match (FailureKind::of(&err), &err) {
            (FailureKind::Unauthorized, _) => MintError::Unauthorized,
            (FailureKind::Forbidden, kube::Error::Api(status)) => MintError::Refused {
                account: account.to_string(),
                message: Text::new(&status.message),
            },
            (_, err) => MintError::Failed(Text::new(&format!(
                "the TokenRequest for {account} failed: {err}"
            ))),
        }),
    }
}

/// Checks that `token` authenticates on the member as `user`, through a client built like
/// the member's own (same endpoint, CA, proxy and policy) that carries only `token`.
pub(crate) async fn verify(
    config: &MemberClientConfig,
    policy: &EndpointPolicy,
    token: &SecretString,
    user: &str,
    deadline: Duration,
) -> Result<(), MintError> {
    let credential = Credential::from_token_bytes(token.expose_secret().as_bytes())
        .map_err(|err| MintError::NotVerified(format!("is unusable: {err}")))?;
    let minted = Minted(Arc::new(credential));
    let cache = CredentialCache::new(minted, CredentialCacheConfig::default());
    let client = ClientFactory::new(cache)
        .with_policy(policy.clone())
        .build(config, &CredentialHealth::new())
        .map_err(|err| MintError::Failed(Text::new(&err.to_string())))?;
    let seen = user_of(&client, deadline)
        .await
        .map_err(|why| MintError::NotVerified(format!("could not be checked: {why}")))?;
    if seen == user {
        return Ok(());
    }
    Err(MintError::NotVerified(format!(
        "authenticates as {seen:?}, not {user:?}"
    )))
}

/// The one credential a verifying client carries.
struct Minted(Arc<Credential>);

#[async_trait]
impl CredentialSource for Minted {
    async fn fetch(&self, _key: &CredentialKey) -> Result<Credential, SourceError> {
        Ok((*self.0).clone())
    }
}
