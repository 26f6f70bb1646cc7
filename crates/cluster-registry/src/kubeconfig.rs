//! A kubeconfig as a member definition: Cluster API's `<cluster>-kubeconfig` Secrets, Flux's
//! `value` / `value.yaml` Secrets, and member files' `kubeconfig:`.
//!
//! The kubeconfig's current context (else its only context, else its only cluster and user)
//! names the cluster and the user:
//! - `server`, `certificate-authority-data`, `proxy-url`, `tls-server-name` and
//!   `insecure-skip-tls-verify` configure the connection;
//! - `token`, `client-certificate-data` + `client-key-data`, or `exec` is the credential.
//!
//! A kubeconfig is written by whoever may write its Secret (or the members directory), so it may
//! not make Tether read a file (`certificate-authority`, `tokenFile`, `client-certificate`,
//! `client-key`): those are `SecretInvalid`. `auth-provider`, basic auth and impersonation are
//! refused the same way, not ignored, so that a member never silently runs as someone else. An
//! `exec` plugin runs only if its command is on the exec allow-list.

use std::collections::HashMap;

use base64::Engine as _;
use bytes::Bytes;
use kube::config::{AuthInfo, Cluster, Kubeconfig, NamedExtension};
use member_client::{
    CredentialKey, SourceError,
    exec::{ExecApiVersion, ExecCluster, ExecConfig, ExecEnvVar},
    validation,
};
use secrecy::ExposeSecret as _;

use crate::{
    InvalidReason, MemberSpec,
    member::checked_spec,
    stored_credential::{Material, StoredCredential},
};

/// The cluster extension that is handed to exec plugins as `spec.cluster.config`.
pub const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";

/// The largest kubeconfig read, in bytes (Secrets are capped at 1 MiB anyway).
pub const MAX_KUBECONFIG_BYTES: usize = 1024 * 1024;

/// What a kubeconfig says of one member.
#[derive(Debug)]
pub(crate) struct KubeconfigMember {
    /// Its server, TLS settings and proxy, checked as every source's are, under no name yet.
    endpoint: Result<MemberSpec, InvalidReason>,
    /// The credential, or why the user entry is unusable.
    pub(crate) credential: Result<StoredCredential, SourceError>,
}

impl KubeconfigMember {
    /// The spec of the member `name` this kubeconfig defines, whose credential is stored under
    /// `key`.
    pub(crate) fn spec(
        &self,
        name: String,
        key: CredentialKey,
    ) -> Result<MemberSpec, InvalidReason> {
        Ok(MemberSpec {
            name,
            secret_ref: key,
            ..self.endpoint.clone()?
        })
    }
}

/// Reads the member in `raw`, a kubeconfig stored under `key`.
///
/// # Errors
/// [`SourceError::Invalid`] when `raw` is not a kubeconfig with a usable cluster. (An unusable
/// user entry is the member's credential error, in [`KubeconfigMember::credential`].)
pub(crate) fn parse(key: &CredentialKey, raw: &[u8]) -> Result<KubeconfigMember, SourceError> {
    let invalid = |reason: String| SourceError::Invalid {
        key: key.clone(),
        reason,
    };
    if raw.len() > MAX_KUBECONFIG_BYTES {
        return Err(invalid(format!(
            "the kubeconfig is larger than {MAX_KUBECONFIG_BYTES} bytes"
        )));
    }
    let config: Kubeconfig = serde_yaml::from_slice(raw).map_err(|err| {
        // NB: serde_yaml's message may quote the input, which holds the credential: say only
        // where the error is.
        invalid(match err.location() {
            Some(at) => format!(
                "the kubeconfig is not valid YAML (line {} column {})",
                at.line(),
                at.column()
            ),
            None => "the kubeconfig is not a valid kubeconfig".to_owned(),
        })
    })?;
    let (cluster, user) = selected(&config).map_err(invalid)?;
    let cluster = cluster.ok_or_else(|| invalid("the selected cluster is empty".to_owned()))?;
    if cluster.certificate_authority.is_some() {
        return Err(invalid(
            "the cluster names a certificate-authority file; only certificate-authority-data \
             is read from a kubeconfig"
                .to_owned(),
        ));
    }
    let server = cluster
        .server
        .clone()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| invalid("the cluster has no server".to_owned()))?;
    let ca_bundle = ca_data(cluster.certificate_authority_data.as_deref()).map_err(invalid)?;
    let credential = user
        .ok_or_else(|| SourceError::MissingKey {
            key: key.clone(),
            field: "users[].user".to_owned(),
        })
        .and_then(|user| credential(key, user, &server, cluster, ca_bundle));
    let endpoint = checked_spec(
        String::new(),
        server,
        key.clone(),
        cluster.insecure_skip_tls_verify.unwrap_or(false),
        cluster.proxy_url.clone(),
    )
    .map(|mut spec| {
        spec.endpoint.tls_server_name =
            (cluster.tls_server_name.clone()).filter(|n| !n.trim().is_empty());
        spec
    });
    Ok(KubeconfigMember {
        endpoint,
        credential,
    })
}

/// The PEM CA bundle in a kubeconfig cluster's `certificate-authority-data` (base64 of PEM);
/// `None` when absent or blank.
///
/// # Errors
/// What is wrong with it: not base64, or not PEM certificates.
pub(crate) fn ca_data(data: Option<&str>) -> Result<Option<Bytes>, String> {
    let Some(data) = data.filter(|ca| !ca.trim().is_empty()) else {
        return Ok(None);
    };
    let pem = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| "certificate-authority-data is not base64".to_owned())?;
    validation::ca_bundle(&pem)
        .map_err(|err| format!("certificate-authority-data: {}", err.detail()))?;
    Ok(Some(Bytes::from(pem)))
}

/// The cluster and user of the current context, else of the only context, else the only
/// cluster and the only user.
fn selected(config: &Kubeconfig) -> Result<(Option<&Cluster>, Option<&AuthInfo>), String> {
    let context = match config.current_context.as_deref().filter(|c| !c.is_empty()) {
        Some(name) => Some(
            config
                .contexts
                .iter()
                .find(|c| c.name == name)
                .ok_or_else(|| "current-context names no context".to_owned())?,
        ),
        None if config.contexts.len() == 1 => config.contexts.first(),
        None if config.contexts.is_empty() => None,
        None => return Err("several contexts and no current-context".to_owned()),
    };
    let Some(context) = context.and_then(|c| c.context.as_ref()) else {
        return match (config.clusters.as_slice(), config.auth_infos.as_slice()) {
            ([cluster], [user]) => Ok((cluster.cluster.as_ref(), user.auth_info.as_ref())),
            ([cluster], []) => Ok((cluster.cluster.as_ref(), None)),
            _ => Err("no context, and not exactly one cluster and one user".to_owned()),
        };
    };
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .ok_or_else(|| "the context names no cluster in the kubeconfig".to_owned())?;
    let user = (context.user.as_ref())
        .map(|name| {
            (config.auth_infos.iter())
                .find(|u| &u.name == name)
                .ok_or_else(|| "the context names no user in the kubeconfig".to_owned())
        })
        .transpose()?;
    Ok((
        cluster.cluster.as_ref(),
        user.and_then(|u| u.auth_info.as_ref()),
    ))
}

fn credential(
    key: &CredentialKey,
    user: &AuthInfo,
    server: &str,
    cluster: &Cluster,
    ca_bundle: Option<Bytes>,
) -> Result<StoredCredential, SourceError> {
    let invalid = |reason: &str| SourceError::Invalid {
        key: key.clone(),
        reason: reason.to_owned(),
    };
    if user.token_file.is_some() || user.client_certificate.is_some() || user.client_key.is_some() {
        return Err(invalid(
            "the user names a file (tokenFile, client-certificate or client-key); only token, \
             client-certificate-data and client-key-data are read from a kubeconfig",
        ));
    }
    if user.auth_provider.is_some() {
        return Err(invalid(
            "auth-provider is not supported (it was removed from client-go); use exec",
        ));
    }
    if user.username.is_some() || user.password.is_some() {
        return Err(invalid("basic auth (username/password) is not supported"));
    }
    if user.impersonate.is_some()
        || user.impersonate_uid.is_some()
        || user.impersonate_groups.is_some()
        || user.impersonate_user_extra.is_some()
    {
        return Err(invalid("impersonation is not supported"));
    }
    let cert = user
        .client_certificate_data
        .as_deref()
        .map(|data| decode(key, "client-certificate-data", data))
        .transpose()?;
    let client_key = user
        .client_key_data
        .as_ref()
        .map(|data| decode(key, "client-key-data", data.expose_secret()))
        .transpose()?;
    let exec = user
        .exec
        .as_ref()
        .map(|exec| {
            let info = ExecCluster {
                server: server.to_owned(),
                certificate_authority_data: ca_bundle.as_deref().map(<[u8]>::to_vec),
                tls_server_name: cluster.tls_server_name.clone(),
                insecure_skip_tls_verify: cluster.insecure_skip_tls_verify.unwrap_or(false),
                proxy_url: cluster.proxy_url.clone(),
                config: exec_extension(cluster.extensions.as_deref()),
            };
            exec_config(key, "exec", exec, info)
        })
        .transpose()?;
    let token = user.token.as_ref().map(|t| t.expose_secret().as_bytes());
    Material {
        token,
        client_certificate_pem: cert.as_deref(),
        client_key_pem: client_key.as_deref(),
        exec,
        ca_bundle,
    }
    .stored(key)
}

fn decode(key: &CredentialKey, field: &str, data: &str) -> Result<Vec<u8>, SourceError> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| SourceError::Invalid {
            key: key.clone(),
            reason: format!("{field} is not base64"),
        })
}

/// A kubeconfig-shaped `exec` as member-client runs it, against `cluster`: the one conversion
/// for every source's plugin. `field` names the stanza in errors.
pub(crate) fn exec_config(
    key: &CredentialKey,
    field: &str,
    exec: &kube::config::ExecConfig,
    cluster: ExecCluster,
) -> Result<ExecConfig, SourceError> {
    let invalid = |reason: String| SourceError::Invalid {
        key: key.clone(),
        reason,
    };
    let command = exec
        .command
        .clone()
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| invalid(format!("{field} has no command")))?;
    let api_version = (exec.api_version.as_deref().unwrap_or_default())
        .parse::<ExecApiVersion>()
        .map_err(|_| {
            invalid(format!(
                "{field}.apiVersion is not client.authentication.k8s.io/v1 or /v1beta1"
            ))
        })?;
    let env = env_vars(exec.env.as_ref())
        .ok_or_else(|| invalid(format!("an entry of {field}.env lacks name or value")))?;
    Ok(ExecConfig {
        command,
        args: exec.args.clone().unwrap_or_default(),
        env,
        api_version,
        provide_cluster_info: exec.provide_cluster_info,
        cluster: Some(cluster),
    })
}

/// `vars` as a kubeconfig's `exec.env`: `name`/`value` pairs.
pub(crate) fn exec_env<'a>(
    vars: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<HashMap<String, String>> {
    let pair = |(name, value): (&String, &String)| {
        HashMap::from([
            ("name".to_owned(), name.clone()),
            ("value".to_owned(), value.clone()),
        ])
    };
    vars.into_iter().map(pair).collect()
}

/// A kubeconfig's `exec.env` as plugin variables; `None` when an entry lacks its name or
/// value.
pub(crate) fn env_vars(env: Option<&Vec<HashMap<String, String>>>) -> Option<Vec<ExecEnvVar>> {
    let var = |pair: &HashMap<String, String>| {
        Some(ExecEnvVar {
            name: pair.get("name")?.clone(),
            value: pair.get("value")?.clone(),
        })
    };
    env.into_iter().flatten().map(var).collect()
}

fn exec_extension(extensions: Option<&[NamedExtension]>) -> Option<serde_json::Value> {
    extensions?
        .iter()
        .find(|e| e.name == EXEC_EXTENSION)
        .map(|e| e.extension.clone())
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
