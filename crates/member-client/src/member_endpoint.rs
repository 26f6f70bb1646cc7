//! [`MemberEndpoint`]: how to reach a member's apiserver, as its definition says and its
//! client dials it.

/// Where a member's apiserver is, the route to it, and the name its serving certificate is
/// verified against. The CA bundle is not part of it: it travels with the credential.
///
/// ```
/// use member_client::MemberEndpoint;
/// let endpoint = MemberEndpoint::new("https://10.0.0.1:6443");
/// assert!(endpoint.proxy_url.is_none() && !endpoint.insecure_skip_tls_verify);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberEndpoint {
    /// The apiserver's URL, `https://host[:port][/path]` (`http` for local tests).
    pub url: String,
    /// Skip verifying the serving certificate (Karmada's `insecureSkipTLSVerification`).
    pub insecure_skip_tls_verify: bool,
    /// An `http://` or `https://` proxy to tunnel through.
    pub proxy_url: Option<String>,
    /// The name to verify the serving certificate against (and send as SNI), when it is not
    /// the URL's host (a kubeconfig's `tls-server-name`, Argo CD's
    /// `tlsClientConfig.serverName`).
    pub tls_server_name: Option<String>,
}

impl MemberEndpoint {
    /// `url`, reached directly, its certificate verified against its host.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }
}

impl From<String> for MemberEndpoint {
    fn from(url: String) -> Self {
        Self::new(url)
    }
}

impl From<&str> for MemberEndpoint {
    fn from(url: &str) -> Self {
        Self::new(url)
    }
}

impl From<&String> for MemberEndpoint {
    fn from(url: &String) -> Self {
        Self::new(url)
    }
}
