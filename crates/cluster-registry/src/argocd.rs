//! Argo CD cluster Secrets: the member definition and its credential in one Secret (the
//! format is on [`ArgoCdConfig`]).

use std::collections::BTreeMap;

use base64::Engine as _;
use bytes::Bytes;
use k8s_openapi::api::core::v1::Secret;
#[cfg(feature = "minting")]
use kube::ResourceExt as _;
use member_client::{
    CredentialKey, SourceError,
    exec::{ExecCluster, ExecConfig},
    validation,
};
use serde::Deserialize;

#[cfg(feature = "minting")]
use crate::minting::{MintRequest, TokenHome};
use crate::{
    InvalidReason, MemberDefinition, kubeconfig,
    member::checked_spec,
    secret_store::secret_data,
    stored_credential::{Material, StoredCredential},
};

/// Data key holding the cluster's name.
pub const NAME_KEY: &str = "name";
/// Data key holding the cluster's API server URL.
pub const SERVER_KEY: &str = "server";
/// Data key holding the JSON connection config.
pub const CONFIG_KEY: &str = "config";

/// Where Argo CD cluster Secrets are watched.
///
/// Argo CD cluster Secrets: the member definition and its credential in one Secret.
///
/// Argo CD keeps each cluster in a Secret labelled
/// `argocd.argoproj.io/secret-type=cluster` with the
/// keys `name`, `server` and `config`, a JSON document:
///
/// ```json
/// { "bearerToken": "<token>",
///   "tlsClientConfig": { "caData": "<base64 of the PEM CA bundle>", "insecure": false,
///                        "certData": "<base64 PEM>", "keyData": "<base64 PEM>",
///                        "serverName": "<name on the serving certificate>" },
///   "execProviderConfig": { "command": "argocd-k8s-auth", "args": ["aws"],
///                           "env": { "K": "V" },
///                           "apiVersion": "client.authentication.k8s.io/v1beta1" } }
/// ```
///
/// The credential is `bearerToken`, the client certificate `certData` + `keyData`, or the exec
/// plugin `execProviderConfig` (run only if its command is on the exec allow-list). A `config`
/// with none of them (`awsAuthConfig`, say) is
/// [`SecretInvalid`](crate::InvalidReason::SecretInvalid).
#[derive(Clone, Debug)]
pub struct ArgoCdConfig {
    /// The namespaces to watch (Argo CD's own). Default: `["argocd"]`.
    pub namespaces: Vec<String>,
}

impl Default for ArgoCdConfig {
    fn default() -> Self {
        Self {
            namespaces: vec!["argocd".to_owned()],
        }
    }
}

/// The part of Argo CD's `ClusterConfig` Tether reads. Deliberately not `Debug`: it holds the
/// token.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterConfig {
    bearer_token: Option<String>,
    #[serde(default)]
    tls_client_config: TlsClientConfig,
    exec_provider_config: Option<ExecProviderConfig>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TlsClientConfig {
    #[serde(default)]
    insecure: bool,
    server_name: Option<String>,
    ca_data: Option<String>,
    cert_data: Option<String>,
    key_data: Option<String>,
}

/// Argo CD's `ExecProviderConfig`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecProviderConfig {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    api_version: Option<String>,
}

/// Reads the member definition from an Argo CD cluster Secret.
///
/// The member is named by the `name` key, or by the Secret's name when that key is missing or
/// empty; its [`secret_ref`](crate::MemberSpec::secret_ref) is the Secret itself. Whether the
/// token and CA are usable is the credential's business
/// ([`SecretStore`](crate::SecretStore)), except that a `config` that is not JSON makes the
/// whole definition [`SecretInvalid`](InvalidReason::SecretInvalid) (it also holds `insecure`).
pub(crate) fn member_from_secret(secret: &Secret) -> MemberDefinition {
    let data = secret_data(secret);
    let secret_name = secret.metadata.name.clone().unwrap_or_default();
    let name = text(&data, NAME_KEY)
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| secret_name.clone());
    let secret_ref = CredentialKey::new(
        secret.metadata.namespace.clone().unwrap_or_default(),
        secret_name,
    );
    let spec = (|| {
        let config = parse_config(&secret_ref, &data)
            .map_err(|err| InvalidReason::SecretInvalid(err.to_string()))?;
        let mut spec = checked_spec(
            name.clone(),
            text(&data, SERVER_KEY).unwrap_or_default(),
            secret_ref.clone(),
            config.tls_client_config.insecure,
            None,
        )?;
        spec.endpoint.tls_server_name = config
            .tls_client_config
            .server_name
            .filter(|n| !n.trim().is_empty());
        #[cfg(feature = "minting")]
        {
            spec.mint_request = MintRequest::from_annotations(
                secret.annotations(),
                TokenHome::ArgoCdSecret(secret_ref.clone()),
            )?
            .map(Box::new);
        }
        Ok(spec)
    })();
    MemberDefinition { name, spec }
}

/// The credential in an Argo CD cluster Secret's data.
pub(crate) fn credential(
    key: &CredentialKey,
    data: &BTreeMap<String, Bytes>,
) -> Result<StoredCredential, SourceError> {
    let config = parse_config(key, data)?;
    let tls = &config.tls_client_config;
    let ca_bundle = decoded(key, "caData", tls.ca_data.as_deref())?;
    if let Some(pem) = &ca_bundle {
        validation::ca_bundle(pem).map_err(|err| SourceError::Invalid {
            key: key.clone(),
            reason: format!("config.tlsClientConfig.caData: {}", err.detail()),
        })?;
    }
    let cert = decoded(key, "certData", tls.cert_data.as_deref())?;
    let client_key = decoded(key, "keyData", tls.key_data.as_deref())?;
    let exec = config
        .exec_provider_config
        .as_ref()
        .map(|exec| exec_config(key, exec, data, &config, ca_bundle.as_deref()))
        .transpose()?;
    if config.bearer_token.is_none() && cert.is_none() && exec.is_none() {
        return Err(SourceError::MissingKey {
            key: key.clone(),
            field: "config.bearerToken".to_owned(),
        });
    }
    Material {
        token: config.bearer_token.as_deref().map(str::as_bytes),
        client_certificate_pem: cert.as_deref(),
        client_key_pem: client_key.as_deref(),
        exec,
        ca_bundle: ca_bundle.map(Bytes::from),
    }
    .stored(key)
}

/// A base64 `tlsClientConfig` field, decoded; `None` when absent or empty.
fn decoded(
    key: &CredentialKey,
    field: &str,
    value: Option<&str>,
) -> Result<Option<Vec<u8>>, SourceError> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    base64::engine::general_purpose::STANDARD
        .decode(value)
        .map(Some)
        .map_err(|_| SourceError::Invalid {
            key: key.clone(),
            reason: format!("config.tlsClientConfig.{field} is not base64"),
        })
}

/// Argo CD's plugin, converted as a kubeconfig's `exec` is, so both are checked by the same
/// rules.
fn exec_config(
    key: &CredentialKey,
    exec: &ExecProviderConfig,
    data: &BTreeMap<String, Bytes>,
    config: &ClusterConfig,
    ca_bundle: Option<&[u8]>,
) -> Result<ExecConfig, SourceError> {
    let exec = kube::config::ExecConfig {
        api_version: exec.api_version.clone(),
        command: exec.command.clone(),
        args: Some(exec.args.clone()),
        env: Some(kubeconfig::exec_env(&exec.env)),
        ..kube::config::ExecConfig::default()
    };
    let cluster = ExecCluster {
        certificate_authority_data: ca_bundle.map(<[u8]>::to_vec),
        tls_server_name: config.tls_client_config.server_name.clone(),
        insecure_skip_tls_verify: config.tls_client_config.insecure,
        ..ExecCluster::new(text(data, SERVER_KEY).unwrap_or_default())
    };
    kubeconfig::exec_config(key, "config.execProviderConfig", &exec, cluster)
}

fn parse_config(
    key: &CredentialKey,
    data: &BTreeMap<String, Bytes>,
) -> Result<ClusterConfig, SourceError> {
    let raw = data
        .get(CONFIG_KEY)
        .ok_or_else(|| SourceError::MissingKey {
            key: key.clone(),
            field: CONFIG_KEY.to_owned(),
        })?;
    serde_json::from_slice(raw).map_err(|err| SourceError::Invalid {
        key: key.clone(),
        // NB: serde_json's message may quote the input (`invalid type: string "…"`), and the
        // input holds the token: report only where and what kind of error it was.
        reason: format!(
            "{CONFIG_KEY} is not a valid cluster config ({:?} error at line {} column {})",
            err.classify(),
            err.line(),
            err.column()
        ),
    })
}

fn text(data: &BTreeMap<String, Bytes>, key: &str) -> Option<String> {
    data.get(key)
        .and_then(|v| std::str::from_utf8(v).ok())
        .map(|v| v.trim().to_owned())
}

#[cfg(test)]
mod tests;
