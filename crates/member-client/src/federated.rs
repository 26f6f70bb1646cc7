//! Federated credentials: tokens the control plane mints for the collector's own
//! ServiceAccount, one audience per member, so that no member credential is stored anywhere.
//!
//! A member whose apiserver trusts the control plane's ServiceAccount issuer (structured
//! authentication configuration, a `jwt` authenticator) accepts a token whose audience names
//! it. [`FederatedIdentity`] asks the control plane for such a token (TokenRequest) whenever
//! the [`CredentialCache`](crate::CredentialCache) loads: on the first use, ahead of `exp`, and
//! after a 401. The audience is derived from the member's name, never from its definition, so
//! no definition obtains a token that another member accepts.
//!
//! ```
//! use member_client::{CredentialKey, federated::FederatedConfig};
//!
//! let key = CredentialKey::federated("member1");
//! assert_eq!(key.federated_member(), Some("member1"));
//! let config = FederatedConfig::new("tether-system", "tether-collector");
//! assert_eq!(config.audience("member1"), "tether.io/member/member1");
//! ```

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::ServiceAccount,
};
use kube::{Api, Client, api::PostParams};

use crate::{Credential, CredentialKey, CredentialKind, CredentialSource, SourceError, text::Text};

/// The [`CredentialKey`] namespace of federated credentials. It holds a `/`, which no
/// Kubernetes namespace does, so it never names a Secret.
pub const FEDERATED_NAMESPACE: &str = "tether.io/federated";

/// The audience prefix a member's tokens carry unless the operator picks another.
pub const DEFAULT_AUDIENCE_PREFIX: &str = "tether.io/member/";

/// The shortest lifetime TokenRequest grants, and the default: what can be stolen expires soon.
pub const MIN_LIFETIME: Duration = Duration::from_secs(600);

/// How long one TokenRequest may take.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

impl CredentialKey {
    /// The key of member `member`'s federated credential.
    pub fn federated(member: &str) -> Self {
        Self::new(FEDERATED_NAMESPACE, member)
    }

    /// The member whose federated credential this key names; `None` for a Secret or a file.
    pub fn federated_member(&self) -> Option<&str> {
        (self.namespace == FEDERATED_NAMESPACE).then_some(self.name.as_str())
    }
}

/// Whose tokens are minted, for which audience and for how long.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FederatedConfig {
    /// The namespace of the collector's own ServiceAccount on the control plane.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// A member's audience is this prefix followed by the member's name.
    pub audience_prefix: String,
    /// The lifetime asked for; at least [`MIN_LIFETIME`]. The control plane may grant less.
    pub lifetime: Duration,
}

impl FederatedConfig {
    /// Tokens of ServiceAccount `namespace/name`, with the default audience prefix and
    /// lifetime (10 minutes).
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            audience_prefix: DEFAULT_AUDIENCE_PREFIX.to_owned(),
            lifetime: MIN_LIFETIME,
        }
    }

    /// The same, with audiences `prefix<member>`.
    #[must_use]
    pub fn audience_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.audience_prefix = prefix.into();
        self
    }

    /// The same, asking for `lifetime` (raised to [`MIN_LIFETIME`]).
    #[must_use]
    pub fn lifetime(mut self, lifetime: Duration) -> Self {
        self.lifetime = lifetime.max(MIN_LIFETIME);
        self
    }

    /// The audience of member `member`'s tokens.
    pub fn audience(&self, member: &str) -> String {
        format!("{}{member}", self.audience_prefix)
    }

    /// `namespace/name`.
    pub fn account(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Why the control plane gave no federated token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FederationError {
    /// The control plane answered with an error status: 401 (its own credential is rejected),
    /// 403 (it may not `create` `serviceaccounts/token` for its ServiceAccount), 404 (no such
    /// ServiceAccount) or 422 (an audience or lifetime it refuses). Permanent until someone
    /// fixes the control plane's RBAC or the collector's flags.
    #[error("the control plane refused the TokenRequest for {account} ({code}): {message}")]
    Refused {
        /// `namespace/name` of the ServiceAccount.
        account: String,
        /// The HTTP status.
        code: u16,
        /// The control plane's message.
        message: Text,
    },
    /// It could not be asked, or did not answer in time, or answered without a token.
    /// Transient.
    #[error("the TokenRequest for {account} failed: {why}")]
    Failed {
        /// `namespace/name` of the ServiceAccount.
        account: String,
        /// What went wrong.
        why: Text,
    },
}

/// Mints federated credentials on the control plane, through a client that authenticates as
/// the collector's own ServiceAccount (or any identity that may `create` its
/// `serviceaccounts/token`).
#[derive(Clone)]
pub struct FederatedIdentity {
    client: Client,
    config: FederatedConfig,
}

impl std::fmt::Debug for FederatedIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FederatedIdentity")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl FederatedIdentity {
    /// Mints with `client`, a client of the control plane.
    pub fn new(client: Client, config: FederatedConfig) -> Self {
        Self { client, config }
    }

    /// Whose tokens, for which audiences.
    pub fn config(&self) -> &FederatedConfig {
        &self.config
    }

    /// A fresh token for member `member`'s audience.
    ///
    /// # Errors
    /// [`SourceError::Federation`] when the control plane refuses or fails, and the token's
    /// own errors ([`Credential::from_token_bytes`]).
    pub async fn mint(&self, member: &str) -> Result<Credential, SourceError> {
        let account = self.config.account();
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(vec![self.config.audience(member)]),
                expiration_seconds: Some(
                    i64::try_from(self.config.lifetime.as_secs()).unwrap_or(i64::MAX),
                ),
                bound_object_ref: None,
            }),
            ..TokenRequest::default()
        };
        let api = Api::<ServiceAccount>::namespaced(self.client.clone(), &self.config.namespace);
        let params = PostParams::default();
        let asked = api.create_token_request(&self.config.name, &params, &request);
        let failed = |why: &str| FederationError::Failed {
            account: account.clone(),
            why: Text::new(why),
        };
        let answer = tokio::time::timeout(REQUEST_DEADLINE, asked)
            .await
            .map_err(|_| failed(&format!("no answer within {REQUEST_DEADLINE:?}")))?;
        let status = match answer {
            Ok(answer) => answer.status,
            Err(kube::Error::Api(status)) if matches!(status.code, 401 | 403 | 404 | 422) => {
                return Err(FederationError::Refused {
                    account: account.clone(),
                    code: status.code,
                    message: Text::new(&status.message),
                }
                .into());
            }
            Err(err) => return Err(failed(&err.to_string()).into()),
        };
        let status = status.ok_or_else(|| failed("the answer holds no status"))?;
        let token = status.token.unwrap_or_default();
        let credential = Credential::from_token_bytes(token.as_bytes())?;
        // Where it says nothing, the JWT's `exp` stands.
        let expires_at = status.expiration_timestamp.map(|at| SystemTime::from(at.0));
        Ok(credential.produced_by(CredentialKind::Federated, expires_at))
    }
}

#[async_trait]
impl CredentialSource for FederatedIdentity {
    /// A fresh token for the member `key` names ([`CredentialKey::federated`]).
    ///
    /// # Errors
    /// [`SourceError::NotFound`] for a key that names no member's federated credential, else
    /// as [`mint`](FederatedIdentity::mint).
    async fn fetch(&self, key: &CredentialKey) -> Result<Credential, SourceError> {
        match key.federated_member() {
            Some(member) => self.mint(member).await,
            None => Err(SourceError::NotFound { key: key.clone() }),
        }
    }
}

#[cfg(test)]
mod tests;
