//! The collector run in-process against the harness, and a small HTTP client for its API.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use anyhow::Context as _;
use clap::Parser as _;
use collector::cli::Args;
use testkit::{Step, eventually};
use tokio::{sync::oneshot, task::JoinHandle};

/// A collector running in this process until dropped (or [`stop`](Self::stop)ped).
pub struct RunningCollector {
    /// Where its HTTP server listens.
    pub addr: SocketAddr,
    /// Where its probe server (`/healthz`, `/readyz`) listens.
    pub probe_addr: SocketAddr,
    /// The bearer token [`get`](Self::get) sends, if any ([`with_reader`](Self::with_reader)).
    reader: Option<String>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl RunningCollector {
    /// Starts `collector` with `args` (after the program name) plus `--listen` and
    /// `--probe-listen` on free loopback ports, and waits until `/healthz` answers.
    ///
    /// # Errors
    /// Flags that don't parse, or the collector not serving within 10 s.
    pub async fn start(args: &[String]) -> anyhow::Result<Self> {
        let addr = testkit::free_loopback_addr()?;
        let probe_addr = testkit::free_loopback_addr()?;
        let mut argv = vec![
            "collector".to_owned(),
            "--listen".to_owned(),
            addr.to_string(),
            "--probe-listen".to_owned(),
            probe_addr.to_string(),
            // The harness reads the API over plain HTTP.
            "--insecure-plain-http-listen".to_owned(),
            // The test apiservers listen on loopback, which members may not name by default.
            "--allow-endpoint".to_owned(),
            "127.0.0.1/32".to_owned(),
        ];
        argv.extend(args.iter().cloned());
        let args = Args::try_parse_from(argv)?;
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(collector::app::run(args, async move {
            let _ = rx.await;
        }));
        let mut running = Self {
            addr,
            probe_addr,
            reader: None,
            shutdown: Some(tx),
            task: Some(task),
        };
        let served = eventually(
            "the collector serves /healthz",
            Duration::from_secs(10),
            || {
                let stopped = running.task.as_ref().is_some_and(JoinHandle::is_finished);
                let running = &running;
                async move {
                    match running.get("/healthz").await {
                        Ok(_) => Step::Done(()),
                        Err(_) if stopped => Step::Fail(anyhow::anyhow!("it stopped at start")),
                        Err(err) => Step::Pending(format!("{err:#}")),
                    }
                }
            },
        )
        .await;
        if served.is_err() && running.task.as_ref().is_some_and(JoinHandle::is_finished) {
            let ended = running.wait_for_exit(Duration::from_secs(1)).await?;
            anyhow::bail!(
                "the collector stopped at start: {:#}",
                ended.err().unwrap_or_else(|| anyhow::anyhow!("no error"))
            );
        }
        served.map(|()| running)
    }

    /// Makes [`get`](Self::get) (and what uses it) send `token` as a bearer token: the
    /// collector authenticates and authorizes `/metrics` and `/api/...` readers against the
    /// control plane, so the token must be one it accepts with an identity allowed to `get`
    /// those paths (the harness's admin token is).
    #[must_use]
    pub fn with_reader(mut self, token: &str) -> Self {
        self.reader = Some(token.to_owned());
        self
    }

    /// `GET path` with the reader token if one is set: the status code and body.
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        testkit::http_get_as(self.addr, path, self.reader.as_deref()).await
    }

    /// `GET path` as JSON, expecting 200.
    ///
    /// # Errors
    /// Connection errors, another status, or a body that is not JSON.
    pub async fn get_json(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        let (status, body) = self.get(path).await?;
        anyhow::ensure!(status == 200, "GET {path}: {status} {body}");
        Ok(serde_json::from_str(&body)?)
    }

    /// The sum of the samples of metric `name` that carry the labels of `selector` (e.g.
    /// `member="member1"`; empty for all), as [`testkit::metrics::sum`] reads them.
    pub async fn metric(&self, name: &str, selector: &str) -> anyhow::Result<f64> {
        let (status, text) = self.get("/metrics").await?;
        anyhow::ensure!(status == 200, "GET /metrics: {status}");
        Ok(testkit::metrics::sum(&text, name, selector))
    }

    /// Polls until `tether_member_ready` of `member` is 1.
    ///
    /// # Errors
    /// Not within `limit`.
    pub async fn wait_member_ready(&self, member: &str, limit: Duration) -> anyhow::Result<()> {
        let selector = format!("member=\"{member}\"");
        eventually(&format!("{member} is ready"), limit, || async {
            let ready = self.metric("tether_member_ready", &selector).await?;
            anyhow::ensure!(ready == 1.0, "tether_member_ready is {ready}");
            anyhow::Ok(())
        })
        .await
    }

    /// Waits for the collector to end by itself, up to `limit`, and returns how it ended.
    ///
    /// # Errors
    /// The collector still running after `limit`.
    pub async fn wait_for_exit(&mut self, limit: Duration) -> anyhow::Result<anyhow::Result<()>> {
        let task = self.task.take().context("already stopped")?;
        let ended = tokio::time::timeout(limit, task)
            .await
            .context("the collector is still running")?;
        ended.context("the collector task panicked")
    }

    /// Stops it gracefully.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

impl Drop for RunningCollector {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The flags that point a collector at `control_plane` with `token` as its own credential
/// ([`testkit::control_plane_flags`]), the files in a fresh [`temp_dir`].
pub fn control_plane_args(
    control_plane: &testkit::Cluster,
    token: &str,
) -> anyhow::Result<Vec<String>> {
    testkit::control_plane_flags(control_plane, token, &temp_dir("collector")?)
}

/// The flags of leader-election candidate `identity` holding the Lease for `lease_seconds`.
pub fn candidate<'a>(identity: &'a str, lease_seconds: &'a str) -> [&'a str; 4] {
    [
        "--leader-election-identity",
        identity,
        "--leader-election-lease-seconds",
        lease_seconds,
    ]
}

/// [`control_plane_args`] with the control plane's admin token as the collector's credential.
pub fn admin_args(control_plane: &testkit::Cluster) -> anyhow::Result<Vec<String>> {
    control_plane_args(control_plane, &control_plane.admin_token()?)
}

/// Starts a collector in-process against `control_plane` with `flags`, its own credential and
/// its API's reader the control plane's admin token.
pub async fn start_as_admin(
    control_plane: &testkit::Cluster,
    flags: &[&str],
) -> anyhow::Result<RunningCollector> {
    let mut args = admin_args(control_plane)?;
    args.extend(flags.iter().map(|f| (*f).to_owned()));
    let reader = control_plane.admin_token()?;
    Ok(RunningCollector::start(&args).await?.with_reader(&reader))
}

/// [`start_as_admin`] with `source` flags (where members come from), a probe every
/// `probe_period` (whole seconds, at least 1) and `extra` flags.
pub async fn start_probing(
    control_plane: &testkit::Cluster,
    source: &[&str],
    probe_period: Duration,
    extra: &[&str],
) -> anyhow::Result<RunningCollector> {
    let probe = probe_period.as_secs().max(1).to_string();
    let flags = [source, &["--probe-period", &probe], extra].concat();
    start_as_admin(control_plane, &flags).await
}

/// A control plane and the flags that make a collector read its members from one source
/// there (as `--members-from capi --kubeconfig-namespace …`).
pub struct MemberSource {
    control_plane: testkit::Cluster,
    flags: Vec<String>,
}

impl MemberSource {
    /// The source `flags` name on `control_plane`.
    pub fn new(control_plane: &testkit::Cluster, flags: &[&str]) -> Self {
        let flags = flags.iter().map(|f| (*f).to_owned()).collect();
        let control_plane = control_plane.clone();
        Self {
            control_plane,
            flags,
        }
    }

    /// Starts a collector reading this source, probing every `probe_period`, with `extra`
    /// flags ([`start_probing`]); its API is read with the admin token.
    pub async fn start_collector(
        &self,
        probe_period: Duration,
        extra: &[&str],
    ) -> anyhow::Result<RunningCollector> {
        let source: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        start_probing(&self.control_plane, &source, probe_period, extra).await
    }
}

/// Spawns the `collector` binary with `args` and its stderr in `log_dir`
/// ([`testkit::CollectorProcess::spawn`]), keeps its stdout drained (a full pipe would block
/// it), and returns once it is healthy.
///
/// # Errors
/// No binary, the spawn failing, or not healthy within `limit`.
pub async fn spawn_healthy(
    args: &[String],
    log_dir: &Path,
    limit: Duration,
) -> anyhow::Result<testkit::CollectorProcess> {
    let mut process =
        testkit::CollectorProcess::spawn(&testkit::locate_collector()?, args, log_dir)?;
    if let Some(mut stdout) = process.take_stdout() {
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    }
    process.wait_until_healthy(limit).await?;
    Ok(process)
}

/// [`testkit::metrics::sum`] of a collector process's `/metrics`.
pub async fn process_metric(
    process: &testkit::CollectorProcess,
    name: &str,
    selector: &str,
) -> anyhow::Result<f64> {
    let text = process.metrics().await?;
    Ok(testkit::metrics::sum(&text, name, selector))
}

/// Numbers the directories [`temp_dir`] makes in this process.
static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

/// Creates a fresh directory `tether-e2e-<pid>/<name>-<n>` in the system temp dir and returns
/// its path. It is kept after the run, like the harness's logs.
pub fn temp_dir(name: &str) -> anyhow::Result<PathBuf> {
    let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir()
        .join(format!("tether-e2e-{}", std::process::id()))
        .join(format!("{name}-{n}"));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// What one run of `collector check -o json` gave.
pub struct CheckRun {
    /// Its exit code (-1 if killed by a signal).
    pub code: i32,
    /// Its report.
    pub report: serde_json::Value,
    /// All it wrote, stdout then stderr, to look for what must not be there.
    pub output: String,
}

impl CheckRun {
    /// The report's row of member `name`.
    ///
    /// # Errors
    /// No such row.
    pub fn row(&self, name: &str) -> anyhow::Result<&serde_json::Value> {
        self.report["members"]
            .as_array()
            .and_then(|rows| rows.iter().find(|m| m["name"] == name))
            .with_context(|| format!("no row for {name}: {:#}", self.report))
    }
}

/// Runs the built `collector check -o json --check-timeout 20` with loopback members allowed,
/// then `args`, killed if it outlives `limit`.
///
/// # Errors
/// No binary (build it: `cargo build -p collector --bin collector`), the run outliving
/// `limit`, or a report that is not JSON.
pub async fn collector_check(args: &[String], limit: Duration) -> anyhow::Result<CheckRun> {
    let run = tokio::process::Command::new(testkit::locate_collector()?)
        .arg("check")
        .args(["-o", "json", "--check-timeout", "20"])
        // The test apiservers listen on loopback, which members may not name by default.
        .args(["--allow-endpoint", "127.0.0.1/32"])
        .args(args)
        .env("RUST_LOG", "info")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(limit, run)
        .await
        .context("collector check did not finish")??;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = serde_json::from_str(&stdout)
        .with_context(|| format!("not JSON: {stdout}\nstderr: {stderr}"))?;
    Ok(CheckRun {
        code: output.status.code().unwrap_or(-1),
        report,
        output: format!("{stdout}{stderr}"),
    })
}
