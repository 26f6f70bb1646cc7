//! What a member's Secret (or file) holds, parsed once: a credential, or an exec plugin to run
//! for one.

use std::{fmt, sync::Arc};

use bytes::Bytes;
use member_client::{
    Credential, CredentialKey, SourceError,
    client_identity::ClientIdentity,
    exec::{ExecConfig, ExecPolicy, PluginDeclaration},
};

/// A member's credential as the [`SecretStore`](crate::SecretStore) keeps it.
#[derive(Clone, PartialEq)]
pub(crate) enum StoredCredential {
    /// A token and/or client certificate, parsed when the Secret arrived.
    Static(Credential),
    /// An exec plugin, run when the token cache fetches (on a miss, at 80 % of the last
    /// credential's lifetime, after a 401).
    Exec(Arc<ExecPlan>),
}

/// An exec plugin and the CA bundle of the cluster it authenticates to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ExecPlan {
    pub(crate) config: ExecConfig,
    pub(crate) ca_bundle: Option<Bytes>,
    /// The plugin's declaration when the definition chose it by name (a ClusterProfile's
    /// provider), not by command: it alone may run, with its args and env.
    pub(crate) declaration: Option<Arc<PluginDeclaration>>,
}

impl ExecPlan {
    /// The policy this plan runs under: `policy` itself, or only its declared plugin.
    pub(crate) fn policy(&self, policy: &ExecPolicy) -> ExecPolicy {
        match &self.declaration {
            Some(declaration) => policy.only(Arc::clone(declaration)),
            None => policy.clone(),
        }
    }
}

impl From<Credential> for StoredCredential {
    fn from(credential: Credential) -> Self {
        Self::Static(credential)
    }
}

impl StoredCredential {
    /// The static credential; panics on an exec plugin (tests only).
    #[cfg(test)]
    pub(crate) fn static_credential(&self) -> &Credential {
        match self {
            Self::Static(credential) => credential,
            Self::Exec(plan) => panic!(
                "an exec plugin ({:?}), not a static credential",
                plan.config
            ),
        }
    }

    /// The exec plan; panics on a static credential (tests only).
    #[cfg(test)]
    pub(crate) fn exec_plan(&self) -> &ExecPlan {
        match self {
            Self::Exec(plan) => plan,
            Self::Static(_) => panic!("a static credential, not an exec plan"),
        }
    }

    /// The subject of the client certificate; panics unless the credential is a certificate
    /// and no token (tests only).
    #[cfg(test)]
    pub(crate) fn certificate_subject(&self) -> &str {
        let credential = self.static_credential();
        assert_eq!(
            credential.kind(),
            member_client::CredentialKind::Certificate
        );
        assert!(credential.token().is_none());
        credential.identity().unwrap().subject()
    }

    /// The PEM CA bundle that verifies the member.
    pub(crate) fn ca_bundle(&self) -> Option<&Bytes> {
        match self {
            Self::Static(credential) => credential.ca_bundle(),
            Self::Exec(plan) => plan.ca_bundle.as_ref(),
        }
    }

    /// Whether `self` and `other` authenticate the same way: the same token and certificate,
    /// or the same plugin invocation.
    pub(crate) fn same_material(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Static(a), Self::Static(b)) => a.same_material(b),
            (Self::Exec(a), Self::Exec(b)) => a.config == b.config,
            _ => false,
        }
    }
}

impl fmt::Debug for StoredCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Static(credential) => f.debug_tuple("Static").field(credential).finish(),
            Self::Exec(plan) => f.debug_tuple("Exec").field(&plan.config).finish(),
        }
    }
}

/// The credential fields a source found, before they are checked.
#[derive(Default)]
pub(crate) struct Material<'a> {
    pub(crate) token: Option<&'a [u8]>,
    pub(crate) client_certificate_pem: Option<&'a [u8]>,
    pub(crate) client_key_pem: Option<&'a [u8]>,
    pub(crate) exec: Option<ExecConfig>,
    /// Already checked to be PEM certificates.
    pub(crate) ca_bundle: Option<Bytes>,
}

impl Material<'_> {
    /// The credential these fields make: an exec plugin alone, or a token and/or a client
    /// certificate with its key.
    ///
    /// # Errors
    /// [`SourceError::MissingKey`] when there is no credential or half a certificate,
    /// [`SourceError::Invalid`] when exec is mixed with a static credential, and the token's
    /// and certificate's own errors.
    pub(crate) fn stored(self, key: &CredentialKey) -> Result<StoredCredential, SourceError> {
        let missing = |field: &str| SourceError::MissingKey {
            key: key.clone(),
            field: field.to_owned(),
        };
        if let Some(config) = self.exec {
            if self.token.is_some() || self.client_certificate_pem.is_some() {
                return Err(SourceError::Invalid {
                    key: key.clone(),
                    reason: "exec and a token or client certificate are both set; choose one"
                        .to_owned(),
                });
            }
            return Ok(StoredCredential::Exec(Arc::new(ExecPlan {
                config,
                ca_bundle: self.ca_bundle,
                declaration: None,
            })));
        }
        let identity = match (self.client_certificate_pem, self.client_key_pem) {
            (Some(cert), Some(client_key)) => Some(ClientIdentity::from_pem(cert, client_key)?),
            (Some(_), None) => return Err(missing("client key")),
            (None, Some(_)) => return Err(missing("client certificate")),
            (None, None) => None,
        };
        let credential = Credential::from_parts(self.token, identity)?
            .ok_or_else(|| missing("token, client certificate or exec"))?;
        Ok(StoredCredential::Static(match self.ca_bundle {
            Some(ca) => credential.with_ca_bundle(ca),
            None => credential,
        }))
    }
}
