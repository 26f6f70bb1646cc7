//! An opt-in backend: one k3s cluster in a container (testcontainers), handed out as the same
//! [`Cluster`] handle as the loopback apiservers.
//!
//! Needs a Docker engine that can pull `rancher/k3s` and run privileged containers. Tests that
//! use it are `#[ignore = "…"]`d on machines without one, never skipped silently.
//!
//! Unlike [`Environment`](crate::Environment) it runs a full cluster (controllers, a node), so
//! workload status comes from real controllers; it cannot restart or rotate its CA.

use anyhow::{Context, Result};
use base64::Engine;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tempfile::TempDir;
use testcontainers_modules::k3s::{K3s, KUBE_SECURE_PORT};
use testcontainers_modules::testcontainers::runners::AsyncRunner;
use testcontainers_modules::testcontainers::{ContainerAsync, ImageExt};

use crate::cluster::Cluster;

/// The k3s image tag. testcontainers-modules' default (v1.28) is older than the oldest
/// Kubernetes kube 5 supports (1.33).
pub const K3S_TAG: &str = "v1.33.4-k3s1";

/// A running k3s container. Dropping it stops and removes the container.
#[derive(Debug)]
pub struct K3sCluster {
    cluster: Cluster,
    // Declared before `_conf`: the container goes first, then the directory it wrote into.
    _container: ContainerAsync<K3s>,
    _conf: TempDir,
}

impl K3sCluster {
    /// Starts k3s ([`K3S_TAG`]) named `name`, waits until testcontainers sees it ready, and
    /// reads its admin kubeconfig (a client certificate), pointed at the mapped port on
    /// 127.0.0.1.
    ///
    /// # Errors
    /// If Docker is unreachable, the image cannot be pulled, or the kubeconfig is unusable.
    pub async fn start(name: &str) -> Result<Self> {
        let conf = tempfile::Builder::new()
            .prefix("tether-testkit-k3s-")
            .tempdir()
            .context("creating the k3s config directory")?;
        let container = K3s::default()
            .with_conf_mount(conf.path())
            .with_tag(K3S_TAG)
            .with_privileged(true)
            .with_userns_mode("host")
            .start()
            .await
            .context("starting rancher/k3s (needs a Docker engine that can pull it)")?;
        let port = container
            .get_host_port_ipv4(KUBE_SECURE_PORT)
            .await
            .context("finding the mapped apiserver port")?;
        let yaml = container
            .image()
            .read_kube_config()
            .context("reading k3s.yaml")?;
        let mut kubeconfig = Kubeconfig::from_yaml(&yaml).context("parsing k3s.yaml")?;
        let endpoint = format!("https://127.0.0.1:{port}");
        let mut ca_pem = String::new();
        for named in &mut kubeconfig.clusters {
            if let Some(c) = &mut named.cluster {
                c.server = Some(endpoint.clone());
                if let Some(data) = &c.certificate_authority_data {
                    let pem = base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .context("decoding certificate-authority-data")?;
                    ca_pem = String::from_utf8(pem).context("the k3s CA is not PEM")?;
                }
            }
        }
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .context("loading k3s.yaml")?;
        Ok(Self {
            cluster: Cluster::with_admin_config(name, &endpoint, &ca_pem, config),
            _container: container,
            _conf: conf,
        })
    }

    /// The cluster handle: endpoint, CA, admin client and every ServiceAccount helper.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
}
