//! [`Kubeconfig`]: what a Cluster API kubeconfig Secret holds for one harness member.

use std::path::Path;

use k8s_openapi::ByteString;
use serde_json::{Value, json};
use testkit::{ClientCert, Cluster};

/// A kubeconfig for one harness member: its server and serving CA, and one user.
#[derive(Clone, Debug)]
pub struct Kubeconfig {
    server: String,
    ca_pem: String,
    user: Value,
}

impl Kubeconfig {
    /// The user authenticates with a bearer `token`.
    pub fn token(member: &Cluster, token: &str) -> Self {
        Self::with_user(member, json!({ "token": token }))
    }

    /// The user authenticates with `cert` (`client-certificate-data` + `client-key-data`).
    pub fn client_cert(member: &Cluster, cert: &ClientCert) -> Self {
        Self::with_user(
            member,
            json!({
                "client-certificate-data": base64(&cert.cert_pem),
                "client-key-data": base64(&cert.key_pem),
            }),
        )
    }

    /// The user runs the exec plugin `command` (`client.authentication.k8s.io/v1`, never
    /// interactive) with `env` added to its environment.
    pub fn exec(member: &Cluster, command: &Path, env: &[(&str, String)]) -> Self {
        let env: Vec<Value> = env
            .iter()
            .map(|(name, value)| json!({ "name": name, "value": value }))
            .collect();
        Self::with_user(
            member,
            json!({ "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": command.display().to_string(),
                "env": env,
                "interactiveMode": "Never",
            }}),
        )
    }

    fn with_user(member: &Cluster, user: Value) -> Self {
        Self {
            server: member.endpoint().to_owned(),
            ca_pem: member.ca_pem().to_owned(),
            user,
        }
    }

    /// The kubeconfig as YAML, with one cluster, one user and a current context.
    pub fn to_yaml(&self) -> anyhow::Result<String> {
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": "member", "cluster": {
                "server": self.server,
                "certificate-authority-data": base64(&self.ca_pem),
            }}],
            "users": [{ "name": "tether", "user": self.user }],
            "contexts": [{ "name": "member", "context": { "cluster": "member", "user": "tether" } }],
            "current-context": "member",
        });
        Ok(serde_yaml::to_string(&config)?)
    }
}

/// Standard base64 of `bytes`, as kubeconfigs and Secret `data` hold it. NB: `base64` is only
/// a dev-dependency of this crate; k8s-openapi's `ByteString` serializes the same way.
pub(crate) fn base64(bytes: impl AsRef<[u8]>) -> String {
    // Serializing a ByteString cannot fail: it is always a JSON string.
    serde_json::to_value(ByteString(bytes.as_ref().to_vec()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
