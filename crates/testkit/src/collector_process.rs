//! Tether's `collector` binary as a child process, pointed at a harness control plane: where
//! to find the binary ([`locate_collector`]), the flags that give it a control plane and a
//! credential ([`control_plane_flags`]), and the process itself ([`CollectorProcess`]), which
//! listens on a free loopback port and is killed when dropped.
//!
//! A child process, unlike a collector run in the test's own process, has its own RSS and CPU
//! in `/proc/<pid>` and its own log on stdout.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{ChildStdout, Command},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use crate::{
    cluster::Cluster,
    eventually::{Step, eventually},
    plain_http::http_get,
    ports::free_loopback_addr,
    process::ServerProcess,
};

/// The environment variable that names the collector binary, overriding the search of
/// [`locate_collector`].
pub const COLLECTOR_BIN_ENV: &str = "TETHER_COLLECTOR_BIN";

/// Finds the collector binary: `$TETHER_COLLECTOR_BIN`, else as [`locate_binary`] does.
///
/// # Errors
/// None found: build it first (`cargo build -p collector`).
pub fn locate_collector() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(COLLECTOR_BIN_ENV) {
        return Ok(PathBuf::from(path));
    }
    locate_binary("collector")
}

/// Finds the workspace binary `name` next to the running executable or in one of its
/// ancestors (so `target/release/scale-bench` finds `target/release/collector`, and a test in
/// `target/debug/deps` finds `target/debug/<name>`).
///
/// # Errors
/// None found: build it first (`cargo build -p <package>`).
pub fn locate_binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the running executable")?;
    exe.ancestors()
        .skip(1)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .with_context(|| {
            format!(
                "no {name} binary near {} (build it with `cargo build -p {name}`)",
                exe.display()
            )
        })
}

/// The collector flags that point it at `control_plane` with `token` as its own credential:
/// `--control-plane-url`, `--control-plane-token-file` and `--control-plane-ca-file`, the
/// token and the CA bundle written to `control-plane-token` and `control-plane-ca.crt` in
/// `dir` (which must exist and must outlive the collector: it re-reads the token file).
pub fn control_plane_flags(
    control_plane: &Cluster,
    token: &str,
    dir: &Path,
) -> Result<Vec<String>> {
    let token_file = dir.join("control-plane-token");
    std::fs::write(&token_file, token)
        .with_context(|| format!("writing {}", token_file.display()))?;
    let ca_file = dir.join("control-plane-ca.crt");
    std::fs::write(&ca_file, control_plane.ca_pem())
        .with_context(|| format!("writing {}", ca_file.display()))?;
    Ok(vec![
        "--control-plane-url".to_owned(),
        control_plane.endpoint().to_owned(),
        "--control-plane-token-file".to_owned(),
        token_file.display().to_string(),
        "--control-plane-ca-file".to_owned(),
        ca_file.display().to_string(),
    ])
}

/// A serving certificate for a collector's `--tls-cert-file`, for `127.0.0.1` and
/// `localhost`, and the CA that signed it: all PEM.
pub struct CollectorServingCert {
    /// The CA certificate a client trusts.
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl std::fmt::Debug for CollectorServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectorServingCert")
            .finish_non_exhaustive()
    }
}

impl CollectorServingCert {
    /// A fresh CA named `ca_name` and a serving certificate it signs.
    pub fn generate(ca_name: &str) -> Result<Self> {
        let ca = crate::pki::TestCa::generate(ca_name)?;
        let serving = ca.issue_serving_cert("tether-collector")?;
        Ok(Self {
            ca_pem: ca.pem(),
            cert_pem: serving.cert_pem,
            key_pem: serving.key_pem,
        })
    }
}

/// A running collector child process; killed (SIGKILL) and reaped when dropped.
#[derive(Debug)]
pub struct CollectorProcess {
    process: ServerProcess,
    /// Its HTTP address (`/healthz`, `/metrics`, `/api/v1/clusters`).
    pub addr: SocketAddr,
    /// Its probe address (`/healthz`, `/readyz` only).
    pub probe_addr: SocketAddr,
    /// When it was spawned.
    pub started: Instant,
    /// Where its stderr goes (`collector.stderr`), and where callers put the rest of its logs.
    pub log_dir: PathBuf,
}

impl CollectorProcess {
    /// Spawns `bin` with `--listen` and `--probe-listen` on free loopback ports, in plain HTTP
    /// (`--insecure-plain-http-listen`) unless `args` give `--tls-cert-file`, then `args`, and
    /// `RUST_LOG=info` (so the caller's environment doesn't change what it logs). Its stdout is a pipe: take
    /// it with [`take_stdout`](Self::take_stdout) and keep reading it, or the collector blocks
    /// once the pipe is full. Its stderr goes to `log_dir/collector.stderr`. It does not wait:
    /// see [`wait_until_healthy`](Self::wait_until_healthy).
    ///
    /// # Errors
    /// No free port, `log_dir` not writable, or the spawn failing.
    pub fn spawn(bin: &Path, args: &[String], log_dir: &Path) -> Result<Self> {
        let addr = free_loopback_addr()?;
        let probe_addr = free_loopback_addr()?;
        let mut cmd = Command::new(bin);
        cmd.arg("--listen")
            .arg(addr.to_string())
            .arg("--probe-listen")
            .arg(probe_addr.to_string())
            // Plain HTTP, which `get` speaks, unless the caller serves a certificate.
            .args(
                (!args.iter().any(|arg| arg.starts_with("--tls-cert-file")))
                    .then_some("--insecure-plain-http-listen"),
            )
            // The test apiservers listen on loopback, which members may not name by default.
            .args(["--allow-endpoint", "127.0.0.1/32"])
            .args(args)
            .env("RUST_LOG", "info");
        let started = Instant::now();
        let stderr = log_dir.join("collector.stderr");
        let process = ServerProcess::spawn_piped(cmd, stderr, "the collector".to_owned())?;
        Ok(Self {
            process,
            addr,
            probe_addr,
            started,
            log_dir: log_dir.to_owned(),
        })
    }

    /// Its stdout, the first time this is called.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.process.take_stdout()
    }

    /// Polls `GET /healthz` on the probe port until it answers.
    ///
    /// # Errors
    /// The process exiting, or no answer within `limit` (both name the log directory).
    pub async fn wait_until_healthy(&mut self, limit: Duration) -> Result<()> {
        let probe_addr = self.probe_addr;
        let healthy = eventually("the collector serves /healthz", limit, || {
            let running = self.running();
            async move {
                match http_get(probe_addr, "/healthz").await {
                    Ok(_) => Step::Done(()),
                    Err(_) if !running => Step::Fail(anyhow::anyhow!("it exited at start")),
                    Err(err) => Step::Pending(format!("{err:#}")),
                }
            }
        })
        .await;
        healthy.with_context(|| format!("logs in {}", self.log_dir.display()))
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.process.running()
    }

    /// Sends SIGTERM, as kubelet does, and waits up to `limit` for the process to exit.
    /// Returns how long it took.
    ///
    /// # Errors
    /// The signal failing, or the process still running after `limit`.
    pub async fn terminate(&mut self, limit: Duration) -> Result<Duration> {
        let sent = Instant::now();
        self.process.signal(rustix::process::Signal::TERM)?;
        let exited = eventually("the collector exits after SIGTERM", limit, || {
            let running = self.running();
            async move { !running }
        })
        .await;
        exited.with_context(|| format!("logs in {}", self.log_dir.display()))?;
        Ok(sent.elapsed())
    }

    /// Sends SIGSTOP: the process freezes, as a node under memory pressure or a long GC pause
    /// would freeze it, holding its connections and its view of the world.
    pub fn pause(&self) -> Result<()> {
        self.process.signal(rustix::process::Signal::STOP)
    }

    /// Sends SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self) -> Result<()> {
        self.process.signal(rustix::process::Signal::CONT)
    }

    /// `GET path`: status and body.
    pub async fn get(&self, path: &str) -> Result<(u16, String)> {
        http_get(self.addr, path).await
    }

    /// `GET /metrics`: the Prometheus text.
    ///
    /// # Errors
    /// Connection errors or a status other than 200.
    pub async fn metrics(&self) -> Result<String> {
        let (status, body) = self.get("/metrics").await?;
        anyhow::ensure!(status == 200, "GET /metrics: {status}");
        Ok(body)
    }
}
