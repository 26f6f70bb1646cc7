//! One kube-apiserver process on loopback.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use crate::assets::Assets;
use crate::cluster::Cluster;
use crate::eventually::{IntoStep as _, Step, eventually};
use crate::pki::{SigningKey, TestCa};
use crate::process::ServerProcess;

/// How many log lines an error quotes.
const TAIL: usize = 40;

/// The files and ports one apiserver is started with. Everything lives under `dir`.
#[derive(Debug)]
pub(crate) struct ApiserverSpec {
    /// Cluster name: also the etcd prefix (`/<name>`) and the issuer (`https://<name>.test`).
    name: String,
    dir: PathBuf,
    port: u16,
    etcd_endpoint: String,
    /// Flags besides the harness's own ([`Config::apiserver_flag`](crate::Config::apiserver_flag)).
    pub(crate) extra_flags: Vec<String>,
}

/// A published signing key not signed with yet.
const NEXT_SIGNING_KEY: &str = "next-service-account-signing-key";

/// The files the apiserver reads from `dir`, each named after the flag that passes it
/// (`--tls-cert-file=<dir>/tls-cert-file`).
const FILE_FLAGS: [&str; 6] = [
    "token-auth-file",
    "client-ca-file",
    "service-account-key-file",
    "service-account-signing-key-file",
    "tls-cert-file",
    "tls-private-key-file",
];

impl ApiserverSpec {
    /// Creates `<root>/<name>` and writes every file the apiserver reads but its serving
    /// certificate (see [`issue_serving_cert`](Self::issue_serving_cert)): a new ServiceAccount
    /// signing key, the static token file with `admin_token` (`system:masters`) and the
    /// `client_ca` bundle.
    pub(crate) fn create(
        root: &Path,
        name: &str,
        port: u16,
        etcd_endpoint: String,
        admin_token: &str,
        client_ca: &TestCa,
    ) -> Result<Self> {
        let dir = root.join(name);
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let spec = Self {
            name: name.to_owned(),
            dir,
            port,
            etcd_endpoint,
            extra_flags: Vec::new(),
        };
        let sa_key = SigningKey::generate()?;
        spec.write("service-account-signing-key-file", &sa_key.private_pem)?;
        spec.write("service-account-key-file", &sa_key.public_pem)?;
        // Static token file format: token,user,uid,"group1,group2".
        spec.write(
            "token-auth-file",
            &format!("{admin_token},admin,admin-uid,system:masters\n"),
        )?;
        spec.write("client-ca-file", &client_ca.pem())?;
        Ok(spec)
    }

    /// A new CA and a serving certificate from it, written where the apiserver reads them.
    pub(crate) fn issue_serving_cert(&self) -> Result<TestCa> {
        let ca = TestCa::generate(&format!("{} test CA", self.name))?;
        let serving = ca.issue_serving_cert(&self.name)?;
        self.write("tls-cert-file", &serving.cert_pem)?;
        self.write("tls-private-key-file", &serving.key_pem)?;
        Ok(ca)
    }

    /// The cluster's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The secure port on 127.0.0.1, the same across restarts.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Where file `file` of this apiserver lives.
    pub(crate) fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// A new ServiceAccount signing key: the apiserver signs with it from its next start, and
    /// still verifies with every key it had (one PEM file may hold several), so tokens minted
    /// before keep working.
    pub(crate) fn rotate_signing_key(&self) -> Result<()> {
        self.publish_signing_key()?;
        self.switch_signing_key()
    }

    /// A new ServiceAccount signing key, published from the apiserver's next start (its
    /// public key joins the verifying keys and `/openid/v1/jwks`) but not signed with until
    /// [`switch_signing_key`](Self::switch_signing_key): the first half of a rotation that
    /// gives every party caching the key set time to fetch it.
    pub(crate) fn publish_signing_key(&self) -> Result<()> {
        let public = self.path("service-account-key-file");
        let mut keys = std::fs::read_to_string(&public)
            .with_context(|| format!("reading {}", public.display()))?;
        let sa_key = SigningKey::generate()?;
        if !keys.ends_with('\n') {
            keys.push('\n');
        }
        keys.push_str(&sa_key.public_pem);
        // Public keys first: should the second write fail, the old signing key still verifies.
        self.write("service-account-key-file", &keys)?;
        self.write(NEXT_SIGNING_KEY, &sa_key.private_pem)
    }

    /// Signs with the key [`publish_signing_key`](Self::publish_signing_key) published, from
    /// the apiserver's next start.
    pub(crate) fn switch_signing_key(&self) -> Result<()> {
        let next = self.path(NEXT_SIGNING_KEY);
        let private = std::fs::read_to_string(&next)
            .with_context(|| format!("reading {} (no key was published)", next.display()))?;
        self.write("service-account-signing-key-file", &private)?;
        std::fs::remove_file(&next).with_context(|| format!("removing {}", next.display()))
    }

    fn write(&self, file: &str, contents: &str) -> Result<()> {
        let path = self.dir.join(file);
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))
    }
}

/// The ServiceAccount issuer of cluster `name`: never resolved, only compared.
pub(crate) fn issuer_url(name: &str) -> String {
    format!("https://{name}.test")
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
        let issuer = issuer_url(&spec.name);
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
        for flag in FILE_FLAGS {
            cmd.arg(format!("--{flag}={}", spec.dir.join(flag).display()));
        }
        cmd.args(&spec.extra_flags);
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
        crate::proc_status_bytes(self.pid(), "VmRSS")
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
