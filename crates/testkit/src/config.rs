//! [`Config`]: what an [`Environment`] starts, and how long it waits for it.

use std::time::Duration;

use anyhow::Result;

use crate::assets::Assets;
use crate::environment::Environment;
use crate::federation::Federation;

/// What to start. Build one, then call [`Config::start`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Member clusters besides the control plane (`member1` … `memberN`).
    pub members: usize,
    /// Bound on each wait for etcd `/health` and apiserver `/readyz`.
    pub ready_timeout: Duration,
    /// The binaries; `None` means [`Assets::locate`].
    pub assets: Option<Assets>,
    /// Flags every kube-apiserver gets besides the harness's own.
    pub apiserver_flags: Vec<String>,
    /// Flags one kube-apiserver gets besides those: (cluster name, flag).
    pub cluster_apiserver_flags: Vec<(String, String)>,
    /// Whether members trust the control plane's ServiceAccount issuer; see
    /// [`members_trust_control_plane`](Self::members_trust_control_plane).
    pub federation: Option<Federation>,
}

impl Default for Config {
    /// A control plane and two members, 60 s to get ready, binaries located the envtest way.
    fn default() -> Self {
        Self {
            members: 2,
            ready_timeout: Duration::from_secs(60),
            assets: None,
            apiserver_flags: Vec::new(),
            cluster_apiserver_flags: Vec::new(),
            federation: None,
        }
    }
}

impl Config {
    /// Adds `flag` (as `--name=value`) to every kube-apiserver's command line.
    pub fn apiserver_flag(mut self, flag: impl Into<String>) -> Self {
        self.apiserver_flags.push(flag.into());
        self
    }

    /// Adds `flag` (as `--name=value`) to the command line of the kube-apiserver of `cluster`
    /// (`member1`, …) alone.
    pub fn cluster_apiserver_flag(
        mut self,
        cluster: impl Into<String>,
        flag: impl Into<String>,
    ) -> Self {
        self.cluster_apiserver_flags
            .push((cluster.into(), flag.into()));
        self
    }

    /// Makes every member trust the control plane's ServiceAccount issuer
    /// (`https://control-plane.test`): a member accepts a token the control plane minted
    /// (TokenRequest) with audience `<audience_prefix><member name>`, as user
    /// `<username_prefix><sub>`, where `sub` is `system:serviceaccount:<ns>:<name>`, with no
    /// groups but `system:authenticated`.
    ///
    /// Through structured authentication configuration: each member gets a `jwt`
    /// authenticator (`--authentication-config`) that fetches the control plane's discovery
    /// document and key set on loopback, which the control plane serves to anonymous clients
    /// (ClusterRoleBinding `tether-testkit:issuer-discovery`). The environment starts the
    /// control plane before the members, and [`start`](Self::start) returns once every member
    /// accepts such a token. See [`Environment::set_member_trust`],
    /// [`Environment::federated_probe`] and [`Environment::rotate_signing_key`].
    pub fn members_trust_control_plane(
        mut self,
        audience_prefix: impl Into<String>,
        username_prefix: impl Into<String>,
    ) -> Self {
        self.federation = Some(Federation::new(audience_prefix, username_prefix));
        self
    }

    /// Sets the number of member clusters.
    pub fn members(mut self, members: usize) -> Self {
        self.members = members;
        self
    }

    /// Sets the bound on each readiness wait.
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// Uses these binaries instead of locating them.
    pub fn assets(mut self, assets: Assets) -> Self {
        self.assets = Some(assets);
        self
    }

    /// Starts etcd, then every apiserver at once, and waits until all are ready.
    ///
    /// # Errors
    /// If the binaries cannot be found, a process cannot start, or one is not ready within
    /// [`ready_timeout`](Self::ready_timeout). The error names the log file and quotes its
    /// tail. Whatever had started is stopped again.
    pub async fn start(self) -> Result<Environment> {
        Environment::start_with(self).await
    }
}
