//! A control plane serving the Karmada Cluster CRD, with member1 defined on it.

use anyhow::Result;
use cluster_registry::karmada::Cluster as KarmadaCluster;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::json;
use testkit::{Cluster, Environment, Karmada, PushMember, karmada::SECRET_NAMESPACE};

use super::Agents;

/// One member cluster with two agents, and Karmada on the control plane
/// ([`Karmada::install`]).
pub struct KarmadaSetup {
    pub env: Environment,
    pub admin: kube::Client,
    pub karmada: Karmada,
    pub agents: Agents,
    pub ns: String,
}

impl KarmadaSetup {
    pub async fn start() -> Result<Self> {
        let env = Environment::with_members(1).await?;
        let karmada = Karmada::install(env.control_plane()).await?;
        let agents = Agents::create(env.cluster(1)).await?;
        Ok(Self {
            admin: karmada.client().clone(),
            env,
            karmada,
            agents,
            ns: SECRET_NAMESPACE.to_owned(),
        })
    }

    /// A registry over `client`'s Karmada Clusters that admits the test's loopback member and
    /// its Secret namespace.
    pub fn registry(&self, client: kube::Client) -> cluster_registry::RegistryBuilder {
        cluster_registry::RegistryBuilder::new()
            .endpoint_policy(super::loopback_policy())
            .secret_namespaces([self.ns.clone()])
            .karmada(client)
    }

    pub fn control_plane(&self) -> &Cluster {
        self.env.control_plane()
    }

    pub fn member(&self) -> &Cluster {
        self.env.cluster(1)
    }

    /// The Secrets of the member namespace, through the admin client.
    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    pub fn clusters(&self) -> Api<KarmadaCluster> {
        Api::all(self.admin.clone())
    }

    /// Writes (creates or replaces) Secret `name` with agent-b's token and the member's CA.
    pub async fn write_agent_b_secret(&self, name: &str) -> Result<()> {
        let (token, ca) = (&self.agents.token_b, self.member().ca_pem());
        self.karmada.write_secret(name, token, ca).await
    }

    /// Creates member1's Secret (agent-a's token and `ca`) and its Push Cluster pointing at
    /// the member.
    pub async fn define_member1(&self, ca: &str) -> Result<()> {
        let member1 = PushMember {
            name: "member1",
            ca_pem: ca,
            ..PushMember::of(self.member(), &self.agents.token_a)
        };
        self.karmada.register(&member1).await
    }
}

/// A Karmada member Secret holding `token` and the PEM `ca`.
pub fn secret(name: &str, token: &[u8], ca: &str) -> Secret {
    let mut secret = Secret::default();
    secret.metadata.name = Some(name.to_owned());
    secret.data = Some(
        [
            ("token".to_owned(), ByteString(token.to_vec())),
            ("caBundle".to_owned(), ByteString(ca.as_bytes().to_vec())),
        ]
        .into(),
    );
    secret
}

/// A Karmada Cluster in `mode` whose Secret is `secret_ns/name`.
pub fn cluster(name: &str, mode: &str, endpoint: &str, secret_ns: &str) -> KarmadaCluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": { "name": name },
        "spec": {
            "syncMode": mode,
            "apiEndpoint": endpoint,
            "secretRef": { "namespace": secret_ns, "name": name },
        },
    }))
    .unwrap()
}
