//! Marks each published member's credential Secret with whose it is and where it goes: the
//! label [`CREDENTIAL_MEMBER_LABEL`] and the annotation [`CREDENTIAL_SERVER_ANNOTATION`],
//! which `tether-credential` requires before it hands the credential to a client.
//!
//! The mark repeats what the registry already decided (the member the Secret is bound to, the
//! server its definition names), in the one place a ClusterProfile's writer cannot change.
//! A Secret marked for another member, or a ServiceAccount token Secret, is left alone.

use cluster_registry::{
    clusterprofile::{
        CREDENTIAL_MEMBER_LABEL, CREDENTIAL_SERVER_ANNOTATION, SERVICE_ACCOUNT_TOKEN_TYPE,
    },
    karmada::LocalSecretReference,
};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::json;

/// The field manager of the mark, as of the profiles.
const MANAGER: &str = "tether-collector";

/// The mark one member's Secret should carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    /// The member.
    pub(crate) member: String,
    /// Its credential Secret.
    pub(crate) secret: LocalSecretReference,
    /// The server its profile states.
    pub(crate) server: String,
}

/// What marking found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Marked {
    /// The Secret carries the mark (it did, or now does).
    Done,
    /// The Secret is not this member's to mark; the reason, for a warning.
    Refused(&'static str),
}

/// Secrets of the control plane, as the publisher marks them.
#[derive(Clone)]
pub(crate) struct SecretMarks {
    client: Client,
}

impl SecretMarks {
    /// Marks through `client`.
    pub(crate) fn new(client: Client) -> Self {
        Self { client }
    }

    /// Reads the Secret and, unless it says so already, marks it as `mark` says: a merge
    /// patch at the version read, so a Secret changed meanwhile is looked at again next time.
    ///
    /// # Errors
    /// The requests' (404 included: a Secret that is gone has nothing to mark).
    pub(crate) async fn mark(&self, mark: &Mark) -> Result<Marked, kube::Error> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &mark.secret.namespace);
        let secret = api.get(&mark.secret.name).await?;
        if secret.type_.as_deref() == Some(SERVICE_ACCOUNT_TOKEN_TYPE) {
            return Ok(Marked::Refused("it is a ServiceAccount token Secret"));
        }
        let meta = &secret.metadata;
        let label = (meta.labels.as_ref()).and_then(|l| l.get(CREDENTIAL_MEMBER_LABEL));
        let server = (meta.annotations.as_ref()).and_then(|a| a.get(CREDENTIAL_SERVER_ANNOTATION));
        match label {
            Some(label) if *label != mark.member => {
                return Ok(Marked::Refused(
                    "its tether.io/member label names another member",
                ));
            }
            Some(_) if server == Some(&mark.server) => return Ok(Marked::Done),
            _ => {}
        }
        let patch = json!({"metadata": {
            "resourceVersion": meta.resource_version,
            "labels": {CREDENTIAL_MEMBER_LABEL: mark.member},
            "annotations": {CREDENTIAL_SERVER_ANNOTATION: mark.server},
        }});
        let params = PatchParams {
            field_manager: Some(MANAGER.to_owned()),
            ..PatchParams::default()
        };
        api.patch(&mark.secret.name, &params, &Patch::Merge(&patch))
            .await?;
        Ok(Marked::Done)
    }
}
