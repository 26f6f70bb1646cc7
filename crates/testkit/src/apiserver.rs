//! One kube-apiserver process on loopback.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Result, anyhow};

use crate::assets::Assets;
use crate::cluster::Cluster;
use crate::eventually::{IntoStep as _, Step, eventually};
use crate::process::{ServerProcess, rss_bytes};

/// How many log lines an error quotes.
const TAIL: usize = 40;

/// The files and ports one apiserver is started with. Everything lives under `dir`.
#[derive(Clone, Debug)]
pub(crate) struct ApiserverSpec {
    /// Cluster name: also the etcd prefix (`/<name>`) and the issuer (`https://<name>.test`).
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) port: u16,
    pub(crate) etcd_endpoint: String,
}

/// The PEM serving certificate and key.
pub(crate) const SERVING_CERT: &str = "serving.crt";
pub(crate) const SERVING_KEY: &str = "serving.key";
/// The ServiceAccount token signing key pair.
pub(crate) const SA_KEY: &str = "sa-signing.key";
pub(crate) const SA_PUB: &str = "sa-signing.pub";
/// The CA bundle client certificates are verified against.
pub(crate) const CLIENT_CA: &str = "client-ca.crt";
/// The static tokens (the admin's).
pub(crate) const TOKENS: &str = "tokens.csv";

/// Each file the apiserver reads from `dir`, by the flag that names it.
const FILE_FLAGS: [(&str, &str); 6] = [
    ("--token-auth-file", TOKENS),
    ("--client-ca-file", CLIENT_CA),
    ("--service-account-key-file", SA_PUB),
    ("--service-account-signing-key-file", SA_KEY),
    ("--tls-cert-file", SERVING_CERT),
    ("--tls-private-key-file", SERVING_KEY),
];

impl ApiserverSpec {
    /// `name` ([`SERVING_CERT`], ...) in this apiserver's directory.
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The issuer and audience of this cluster's ServiceAccount tokens.
    pub(crate) fn issuer(&self) -> String {
        format!("https://{}.test", self.name)
    }
}

/// A running kube-apiserver. Dropping it kills it (SIGKILL).
///
/// It runs without kube-controller-manager: aggregated ClusterRoles (`view`, `edit`) stay
/// empty, legacy token Secrets are never filled, deleted namespaces stay `Terminating`, and no
/// workload status changes unless a test patches it (see
/// [`set_deployment_status`](crate::set_deployment_status)).
#[derive(Debug)]
pub struct Apiserver {
    process: ServerProcess,
    port: u16,
}

impl Apiserver {
    /// Spawns the apiserver; its output goes to `<dir>/apiserver-<run>.log`. Does not wait.
    pub(crate) fn spawn(assets: &Assets, spec: &ApiserverSpec, run: u32) -> Result<Self> {
        let issuer = spec.issuer();
        let mut cmd = Command::new(assets.kube_apiserver());
        // Only ever loopback: nothing here is meant to be reachable from outside.
        cmd.arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={}", spec.port))
            .arg(format!("--etcd-servers={}", spec.etcd_endpoint))
            .arg(format!("--etcd-prefix=/{}", spec.name))
            .arg("--authorization-mode=RBAC")
            .arg(format!("--service-account-issuer={issuer}"))
            .arg(format!("--api-audiences={issuer}"))
            .arg("--service-cluster-ip-range=10.0.0.0/24")
            // No controller-manager and one apiserver per prefix: nothing should manage the
            // `kubernetes` Service endpoints.
            .arg("--endpoint-reconciler-type=none")
            .arg("--profiling=false");
        for (flag, name) in FILE_FLAGS {
            cmd.arg(format!("{flag}={}", spec.file(name).display()));
        }
        let log = spec.dir.join(format!("apiserver-{run}.log"));
        let process = ServerProcess::spawn(cmd, log, format!("kube-apiserver {}", spec.name))?;
        Ok(Self {
            process,
            port: spec.port,
        })
    }

    /// Waits (up to `timeout`) until `/readyz` answers 200 through `cluster`'s admin client.
    ///
    /// # Errors
    /// If the process exits first or the deadline passes; the error names the log file and
    /// quotes its tail.
    pub(crate) async fn wait_ready(&mut self, cluster: &Cluster, timeout: Duration) -> Result<()> {
        let what = format!("kube-apiserver for {} answers /readyz", cluster.name());
        let ready = eventually(&what, timeout, || {
            let exited = self.process.exited();
            async move {
                match exited {
                    Ok(None) => cluster.readyz().await.into_step(),
                    Ok(Some(status)) => Step::Fail(anyhow!("it exited ({status})")),
                    Err(err) => Step::Fail(err),
                }
            }
        })
        .await;
        ready.map(drop).map_err(|err| {
            anyhow!(
                "{err:#}; log {}:\n{}",
                self.log_path().display(),
                self.process.log_tail(TAIL)
            )
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The secure port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The log file of this run (stdout and stderr).
    pub fn log_path(&self) -> &Path {
        self.process.log()
    }

    /// Resident set size, from `/proc/<pid>/status`.
    ///
    /// # Errors
    /// If the process is gone or `/proc` is unreadable.
    pub fn rss_bytes(&self) -> Result<u64> {
        rss_bytes(self.pid())
    }

    /// Freezes the process (SIGSTOP): it keeps its port and its connections, and the kernel
    /// still accepts and acknowledges, but nothing answers, like a hung apiserver or a
    /// blackholed network.
    ///
    /// # Errors
    /// If the process is not running.
    pub fn freeze(&self) -> Result<()> {
        self.process.signal(rustix::process::Signal::STOP)
    }

    /// Resumes a frozen process (SIGCONT).
    ///
    /// # Errors
    /// If the process is not running.
    pub fn thaw(&self) -> Result<()> {
        self.process.signal(rustix::process::Signal::CONT)
    }

    /// SIGKILL and reap, without a grace period.
    pub(crate) fn kill_now(&mut self) {
        self.process.kill_now();
    }

    /// SIGTERM, then SIGKILL after `grace`; returns once the process is reaped.
    ///
    /// NB: the apiserver's graceful shutdown waits for open watches (30–60 s), so keep `grace`
    /// short. The port may stay bound a moment longer than the PID: check it separately.
    pub(crate) async fn stop(&mut self, grace: Duration) -> Result<()> {
        self.process.stop(grace).await
    }
}
