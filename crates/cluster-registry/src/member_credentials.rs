//! [`MemberCredentials`]: the registry's one credential source, which reads a member's
//! credential from its Secret (or file), or has the control plane mint a federated one.

use std::sync::Arc;

use async_trait::async_trait;
use member_client::{
    Credential, CredentialKey, CredentialSource, SourceError, federated::FederatedIdentity,
};

use crate::secret_store::SecretStore;

/// Reads every member's credential: federated keys ([`CredentialKey::federated`]) from the
/// control plane, every other key from the [`SecretStore`].
#[derive(Clone, Debug)]
pub(crate) struct MemberCredentials {
    pub(crate) store: SecretStore,
    pub(crate) federation: Option<Arc<FederatedIdentity>>,
}

#[async_trait]
impl CredentialSource for MemberCredentials {
    async fn fetch(&self, key: &CredentialKey) -> Result<Credential, SourceError> {
        match (key.federated_member(), &self.federation) {
            (None, _) => self.store.fetch(key).await,
            (Some(_), Some(federation)) => federation.fetch(key).await,
            // The member table never makes such a member Ready; a caller that asks anyway
            // finds nothing.
            (Some(_), None) => Err(SourceError::NotFound { key: key.clone() }),
        }
    }
}
