//! [`Cluster`]: how to reach one test cluster, and clients for it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use kube::{Client, Config};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use secrecy::ExposeSecret as _;

use crate::metrics::Exposition;
use crate::pki::TestCa;

/// A connect timeout well above what loopback needs, but short enough that a test against a
/// stopped or hung server fails in seconds, not kube's default 30 s.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How to reach one test cluster: its name, HTTPS endpoint, CA and admin credential.
///
/// A plain value: cloning it is cheap and it holds no process. After
/// [`Environment::restart`](crate::Environment::restart) with a new CA, fetch the handle again
/// from the environment: an old clone still holds the old CA. Its `Debug` shows the admin
/// credential redacted (kube keeps it in `secrecy` types).
#[derive(Clone, Debug)]
pub struct Cluster {
    name: String,
    endpoint: String,
    ca_pem: String,
    admin: Config,
    /// Signs client certificates the apiserver accepts; `None` for clusters the harness did
    /// not start (k3s, a model endpoint).
    client_ca: Option<Arc<TestCa>>,
}

impl Cluster {
    /// A cluster whose admin authenticates with a bearer token.
    ///
    /// # Errors
    /// If `ca_pem` holds no certificate or `endpoint` is not a URL.
    pub fn with_admin_token(
        name: &str,
        endpoint: &str,
        ca_pem: &str,
        admin_token: &str,
    ) -> Result<Self> {
        let admin = client_config(endpoint, ca_pem, Some(admin_token))?;
        Ok(Self::with_admin_config(name, endpoint, ca_pem, admin))
    }

    /// A cluster whose admin is described by a ready [`kube::Config`] (say, a client
    /// certificate from a kubeconfig). `admin` must trust `ca_pem` and point at `endpoint`.
    pub fn with_admin_config(name: &str, endpoint: &str, ca_pem: &str, admin: Config) -> Self {
        Self {
            name: name.to_owned(),
            endpoint: endpoint.to_owned(),
            ca_pem: ca_pem.to_owned(),
            admin,
            client_ca: None,
        }
    }

    /// The same cluster, whose apiserver trusts client certificates from `ca`.
    pub(crate) fn with_client_ca(mut self, ca: Arc<TestCa>) -> Self {
        self.client_ca = Some(ca);
        self
    }

    /// The client CA, for issuing certificates.
    pub(crate) fn client_ca(&self) -> Result<&TestCa> {
        self.client_ca.as_deref().with_context(|| {
            format!(
                "{} has no client CA known to the harness (not started by an Environment)",
                self.name
            )
        })
    }

    /// The cluster's name (`control-plane`, `member1`, …).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The HTTPS endpoint, `https://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The PEM CA bundle that verifies [`endpoint`](Self::endpoint)'s serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The PEM certificate of the CA whose client certificates the apiserver accepts
    /// (`--client-ca-file`); `None` if the harness did not start this cluster. It is not the
    /// CA of [`ca_pem`](Self::ca_pem), and it stays the same across restarts.
    pub fn client_ca_pem(&self) -> Option<String> {
        self.client_ca.as_ref().map(|ca| ca.pem())
    }

    /// A `kube::Config` for the cluster admin (`system:masters`).
    pub fn admin_config(&self) -> Config {
        self.admin.clone()
    }

    /// The admin's bearer token, for a process that reads its credential from a file (such as
    /// the collector's `--control-plane-token-file`).
    ///
    /// # Errors
    /// If the admin authenticates without a token (a client certificate, as on k3s).
    pub fn admin_token(&self) -> Result<String> {
        let token =
            self.admin.auth_info.token.as_ref().with_context(|| {
                format!("the admin of {} authenticates without a token", self.name)
            })?;
        Ok(token.expose_secret().to_owned())
    }

    /// A client for the cluster admin (`system:masters`).
    pub fn admin_client(&self) -> Result<Client> {
        Client::try_from(self.admin_config()).context("building the admin client")
    }

    /// A client that authenticates with `token` and trusts this cluster's CA, and nothing
    /// else: the way a member agent sees the cluster.
    pub fn client_with_token(&self, token: &str) -> Result<Client> {
        client_for(&self.endpoint, &self.ca_pem, Some(token))
    }

    /// `GET /readyz` as the admin; `Ok` with the body when the apiserver is ready.
    ///
    /// # Errors
    /// If the request fails or the apiserver is not ready (a non-2xx status).
    pub async fn readyz(&self) -> Result<String> {
        let req = http::Request::get("/readyz")
            .body(Vec::new())
            .context("building GET /readyz")?;
        self.admin_client()?
            .request_text(req)
            .await
            .with_context(|| format!("GET {}/readyz", self.endpoint))
    }

    /// `GET /metrics` as the admin: the apiserver's own metrics.
    pub async fn metrics(&self) -> Result<Exposition> {
        let req = http::Request::get("/metrics")
            .body(Vec::new())
            .context("building GET /metrics")?;
        let text = self
            .admin_client()?
            .request_text(req)
            .await
            .with_context(|| format!("GET {}/metrics", self.endpoint))?;
        Ok(Exposition::parse(&text))
    }
}

/// A client for `endpoint` that trusts exactly the certificates in `ca_pem` and sends `token`
/// (if any) as its bearer token. Use it to point one cluster's CA at another cluster.
///
/// # Errors
/// If `ca_pem` holds no certificate, `endpoint` is not a URL, or kube cannot build the client.
pub fn client_for(endpoint: &str, ca_pem: &str, token: Option<&str>) -> Result<Client> {
    Client::try_from(client_config(endpoint, ca_pem, token)?).context("building a kube client")
}

impl Cluster {
    /// Creates a fresh namespace named from `prefix` holding ServiceAccount `account`, and
    /// mints a token of it that lives `lifetime`: the agent identity most tests start from.
    /// Returns the namespace and the token.
    ///
    /// # Errors
    /// API errors, or a `lifetime` TokenRequest rejects.
    pub async fn create_agent(
        &self,
        prefix: &str,
        account: &str,
        lifetime: Duration,
    ) -> Result<(String, String)> {
        let ns = self.create_namespace(prefix).await?;
        self.create_service_account(&ns, account).await?;
        let token = self.mint_token(&ns, account, lifetime).await?;
        Ok((ns, token))
    }
}

/// The HTTP status of an API error (`401` for a rejected token), `None` for any other error
/// (connection refused, TLS failure, …). kube 5 has no helper for this.
pub fn status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

fn client_config(endpoint: &str, ca_pem: &str, token: Option<&str>) -> Result<Config> {
    let url = endpoint
        .parse()
        .with_context(|| format!("endpoint {endpoint:?} is not a URL"))?;
    let roots = CertificateDer::pem_slice_iter(ca_pem.as_bytes())
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .context("parsing the CA bundle PEM")?;
    anyhow::ensure!(!roots.is_empty(), "the CA bundle holds no certificate");
    let mut config = Config::new(url);
    config.root_cert = Some(roots);
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.auth_info.token = token.map(|t| t.to_owned().into());
    Ok(config)
}
