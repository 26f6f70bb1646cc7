//! Why a run handed out no credential. Each message says what to change; none ever quotes a
//! token or a key (a [`SourceError`] never does, and the Secret's content is never printed).
//!
//! None is retried: client-go runs the plugin again on its next request.

use std::{fmt, path::PathBuf, time::Duration};

use kube::core::Status;
use member_client::{CredentialKey, SourceError, exec::wire::ExecInfoError};

use crate::duration::Short;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// Not started by client-go.
    #[error(
        "KUBERNETES_EXEC_INFO is not set: tether-credential is an exec credential plugin that \
         client-go runs (see --help)"
    )]
    NoExecInfo,
    /// `KUBERNETES_EXEC_INFO` is not an ExecCredential of a version client-go speaks.
    #[error(transparent)]
    ExecInfo(ExecInfoError),
    /// client-go sent no cluster: the provider's execConfig lacks `provideClusterInfo`.
    #[error(
        "KUBERNETES_EXEC_INFO has no spec.cluster: set `provideClusterInfo: true` in the \
         provider's execConfig so that client-go hands over the cluster and its \
         client.authentication.k8s.io/exec extension"
    )]
    NoClusterInfo,
    /// The cluster carries no `client.authentication.k8s.io/exec` extension.
    #[error(
        "spec.cluster.config is empty: the cluster has no client.authentication.k8s.io/exec \
         extension (use the `tether` access provider of a profile Tether publishes)"
    )]
    NoExtension,
    /// The extension is not Tether's.
    #[error(
        "spec.cluster.config is not Tether's exec extension \
         {{\"member\": …, \"secretRef\": {{\"namespace\": …, \"name\": …}}}}"
    )]
    ExtensionInvalid(#[source] serde_json::Error),
    /// The member's credential lives somewhere other than a control-plane Secret.
    #[error(
        "member {member}'s credential is not held in a control-plane Secret (a member file or a \
         plugin the collector runs); tether-credential cannot serve it"
    )]
    NoSecretRef { member: String },
    /// The extension's `secretRef` does not name a Secret.
    #[error("member {member}'s secretRef")]
    SecretRefInvalid {
        member: String,
        /// What is wrong with it.
        #[source]
        source: Box<SourceError>,
    },
    /// `--kubeconfig` is unusable.
    #[error("the kubeconfig {}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No `--kubeconfig`, and kube found no configuration either.
    #[error(
        "no control-plane credential of the caller's: neither $KUBECONFIG, ~/.kube/config nor \
         an in-cluster ServiceAccount (or pass --kubeconfig)"
    )]
    InferConfig(#[source] kube::config::InferConfigError),
    /// The client cannot be built from the configuration (TLS setup, say).
    #[error("building the control-plane client")]
    Client(#[source] kube::Error),
    /// 403: the caller's RBAC does not cover the Secret.
    #[error(
        "the caller may not get Secret {secret} (member {member}): it needs RBAC `get` on \
         `secrets` named {name} in namespace {namespace} (a Role with that rule and a \
         RoleBinding to the caller; see --help)",
        name = secret.name,
        namespace = secret.namespace
    )]
    Forbidden {
        member: String,
        secret: CredentialKey,
        /// What the apiserver said (it names the caller).
        #[source]
        source: ApiStatus,
    },
    /// 404: the Secret the profile names is gone.
    #[error(
        "Secret {secret} of member {member} is gone (404): the member's credential was removed, \
         or the ClusterProfile is out of date"
    )]
    SecretGone {
        member: String,
        secret: CredentialKey,
    },
    /// The Secret is a ServiceAccount token Secret: never served, whatever its labels say.
    #[error(
        "Secret {secret} is a ServiceAccount token Secret (type kubernetes.io/service-account-token): \
         tether-credential never serves one (asked for member {member})"
    )]
    ServiceAccountTokenSecret {
        member: String,
        secret: CredentialKey,
    },
    /// The Secret does not carry Tether's member label.
    #[error(
        "Secret {secret} is not marked as member {member}'s credential: it needs the label \
         tether.io/member={member}, which the collector writes on the Secret of each member it \
         publishes (--publish-clusterprofiles)"
    )]
    NotMarked {
        member: String,
        secret: CredentialKey,
    },
    /// The Secret's member label names another member.
    #[error(
        "Secret {secret} is marked as the credential of member {marked:?}, not of {member}: the \
         profile names another member's Secret"
    )]
    MarkedForAnother {
        member: String,
        secret: CredentialKey,
        /// The member its label names (sanitized).
        marked: String,
    },
    /// The Secret records no server for its member.
    #[error(
        "Secret {secret} records no server for member {member}: it needs the annotation \
         tether.io/server, which the collector writes when it publishes the member's \
         ClusterProfile (--publish-clusterprofiles)"
    )]
    NoRecordedServer {
        member: String,
        secret: CredentialKey,
    },
    /// `KUBERNETES_EXEC_INFO`'s server is not the one recorded for the member.
    #[error(
        "member {member}'s credential is not handed out: the client would send it to {asked:?}, \
         but Secret {secret} records {recorded:?} as the member's server (the ClusterProfile is \
         not the one Tether published, or is out of date)"
    )]
    ServerMismatch {
        member: String,
        secret: CredentialKey,
        /// `spec.cluster.server` of `KUBERNETES_EXEC_INFO` (sanitized).
        asked: String,
        /// The server the Secret records (sanitized).
        recorded: String,
    },
    /// 401: the control plane rejected the caller's own credential.
    #[error(
        "the control plane rejected the caller's own credential (401): renew the kubeconfig's or \
         the ServiceAccount's credential"
    )]
    Unauthorized(#[source] ApiStatus),
    /// Any other failure of the one request.
    #[error("getting Secret {secret} from the control plane")]
    Request {
        secret: CredentialKey,
        #[source]
        source: RequestFailure,
    },
    /// The Secret holds no usable credential.
    #[error("member {member}'s Secret {secret}")]
    Credential {
        member: String,
        secret: CredentialKey,
        /// What is wrong with it.
        #[source]
        source: Box<SourceError>,
    },
    /// The credential is dead, or would be within `--skew`.
    #[error(
        "member {member}'s credential (Secret {secret}) expires at {at}, within --skew {} of now: \
         tether-credential hands out no dead credential; rotate it",
        Short(*skew)
    )]
    Expired {
        member: String,
        secret: CredentialKey,
        /// When it expires, RFC 3339.
        at: String,
        /// The margin it was judged with.
        skew: Duration,
    },
    /// The expiry cannot be written as an RFC 3339 time (out of range).
    #[error("the expiry cannot be written as an RFC 3339 time")]
    Timestamp,
    /// Writing the `ExecCredential` failed.
    #[error("writing the ExecCredential")]
    Output(#[source] std::io::Error),
    /// The whole run took longer than `--timeout`.
    #[error("no credential within --timeout {}", Short(*.0))]
    Timeout(Duration),
}

/// What the apiserver said in a `Status`: its message, which names the caller on a 403.
#[derive(Debug)]
pub(crate) struct ApiStatus(pub(crate) Box<Status>);

impl fmt::Display for ApiStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.message.as_str() {
            "" => write!(f, "HTTP {}", self.0.code),
            message => write!(f, "the apiserver said: {message}"),
        }
    }
}

impl std::error::Error for ApiStatus {}

/// A failed request other than 401, 403 and 404.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestFailure {
    /// The apiserver answered with another error status.
    #[error(transparent)]
    Status(ApiStatus),
    /// Its answer is not a Secret. (serde's message is left out: it may quote the body.)
    #[error("the apiserver's answer is not a Secret")]
    NotASecret,
    /// The apiserver could not be reached, or TLS failed.
    #[error(transparent)]
    Transport(kube::Error),
}

impl Error {
    /// The message and every cause, as one line: control characters (a newline in a member
    /// name, say) become spaces, so one failure is one line of stderr.
    pub(crate) fn one_line(&self) -> String {
        let chain = std::iter::successors(Some(self as &dyn std::error::Error), |e| e.source());
        let text = chain.map(|e| e.to_string()).collect::<Vec<_>>().join(": ");
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forbidden_secret_names_the_rbac_and_the_apiserver_message_on_one_line() {
        let status = Status {
            code: 403,
            message: "secrets \"m1\" is forbidden: User \"alice\" cannot get resource\n\"secrets\""
                .to_owned(),
            ..Status::default()
        };
        let err = Error::Forbidden {
            member: "m1".to_owned(),
            secret: CredentialKey::new("fleet", "m1"),
            source: ApiStatus(Box::new(status)),
        };
        let line = err.one_line();
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.contains("`get` on `secrets` named m1 in namespace fleet"),
            "{line}"
        );
        assert!(line.contains("User \"alice\" cannot get"), "{line}");
    }
}
