//! One etcd on loopback, shared by every apiserver of an environment.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::assets::Assets;
use crate::eventually::{Step, eventually};
use crate::ports::free_ports;
use crate::process::ServerProcess;

/// How many log lines an error quotes.
const TAIL: usize = 30;

/// A running etcd (single member, plain HTTP on 127.0.0.1, data in a caller-owned directory).
/// Dropping it kills it.
#[derive(Debug)]
pub struct Etcd {
    process: ServerProcess,
    client_port: u16,
}

impl Etcd {
    /// Starts etcd with its data and log (`etcd.log`) under `dir`, and waits (up to `timeout`)
    /// until `/health` says it is healthy.
    ///
    /// # Errors
    /// If it cannot be spawned, exits early, or is not healthy in time; the error holds the
    /// tail of its log.
    pub async fn start(assets: &Assets, dir: &Path, timeout: Duration) -> Result<Self> {
        let ports = free_ports(2)?;
        let (client_port, peer_port) = (ports[0], ports[1]);
        let client = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let data = dir.join("etcd-data");
        let mut cmd = Command::new(assets.etcd());
        cmd.arg("--name=testkit")
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=testkit={peer}"))
            // Throwaway data: durability buys nothing and fsyncs cost seconds on slow disks.
            .arg("--unsafe-no-fsync")
            .arg("--log-level=warn");
        let log: PathBuf = dir.join("etcd.log");
        let process = ServerProcess::spawn(cmd, log, "etcd".to_owned())?;
        let mut etcd = Self {
            process,
            client_port,
        };
        etcd.wait_healthy(timeout).await?;
        Ok(etcd)
    }

    /// The client URL (`http://127.0.0.1:<port>`), for `--etcd-servers`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The log file (stdout and stderr).
    pub fn log_path(&self) -> &Path {
        self.process.log()
    }

    /// Stops etcd: SIGTERM, then SIGKILL after `grace`; returns once it is reaped.
    /// Stop the apiservers first: an apiserver whose etcd is gone hangs in shutdown.
    pub async fn stop(&mut self, grace: Duration) -> Result<()> {
        self.process.stop(grace).await
    }

    /// SIGKILL and reap, without a grace period.
    pub(crate) fn kill_now(&mut self) {
        self.process.kill_now();
    }

    async fn wait_healthy(&mut self, timeout: Duration) -> Result<()> {
        let port = self.client_port;
        let healthy = eventually("etcd reports itself healthy", timeout, || {
            let exited = self.process.exited();
            async move {
                match exited {
                    Ok(None) => match health(port).await {
                        Ok(true) => Step::Done(()),
                        Ok(false) => Step::Pending("/health not ok".to_owned()),
                        Err(err) => Step::Pending(format!("{err:#}")),
                    },
                    Ok(Some(status)) => Step::Fail(anyhow!("it exited ({status})")),
                    Err(err) => Step::Fail(err),
                }
            }
        })
        .await;
        healthy.map_err(|err| {
            anyhow!(
                "{err:#}; log {}:\n{}",
                self.log_path().display(),
                self.process.log_tail(TAIL)
            )
        })
    }
}

/// `GET /health` over plain HTTP/1.0 (etcd speaks it; no HTTP client needed).
async fn health(port: u16) -> Result<bool> {
    let exchange = async {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).await?;
        conn.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await?;
        let mut body = Vec::new();
        conn.read_to_end(&mut body).await?;
        Ok::<_, std::io::Error>(body)
    };
    let body = tokio::time::timeout(Duration::from_secs(2), exchange)
        .await
        .context("etcd /health timed out")??;
    let body = String::from_utf8_lossy(&body);
    let status_ok = body.lines().next().is_some_and(|l| l.contains(" 200 "));
    Ok(status_ok && body.contains(r#""health":"true""#))
}
