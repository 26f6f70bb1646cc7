//! The collector binary run as a child process, so that `/proc/<pid>` gives its own RSS and
//! CPU, with its JSON log read line by line.
//!
//! The log is how a rotation is timed per member: the supervisor logs `credentials rotated`
//! (with `member`) when it receives the registry's `CredentialsRotated`, which the registry
//! sends only after it has invalidated that member's token-cache entry. From that instant the
//! member's next request fetches the new token from the in-memory Secret store. The log line's
//! own timestamp (wall clock, same machine as the bench) is used, not when the bench read it.

use std::{
    collections::{BTreeMap, HashMap},
    io::{BufRead, BufReader, Write as _},
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant, SystemTime},
};

use anyhow::Context as _;
use k8s_openapi::jiff::Timestamp;
use secrecy::ExposeSecret as _;

/// The log message that marks a member's token-cache entry as switched to the new Secret.
pub const ROTATED_MESSAGE: &str = "credentials rotated";

/// What the bench reads from the collector's log.
#[derive(Debug, Default)]
struct LogState {
    /// Member → when the collector logged its rotation (first since the last clear).
    rotated: HashMap<String, SystemTime>,
    /// Warnings and errors by message, for the report.
    warnings: BTreeMap<String, u64>,
}

/// A running collector child process; killed when dropped.
pub struct CollectorProcess {
    child: Child,
    /// Its HTTP address (`/metrics`, `/api/v1/clusters`).
    pub addr: SocketAddr,
    /// When it was spawned.
    pub started: Instant,
    log: Arc<Mutex<LogState>>,
    /// Where its stdout (JSON lines) and stderr go.
    pub log_dir: PathBuf,
}

impl CollectorProcess {
    /// Finds the collector binary: `$TETHER_COLLECTOR_BIN`, else `collector` next to the
    /// running executable or in one of its ancestors (so `target/release/scale-bench` finds
    /// `target/release/collector`, and a test in `target/debug/deps` finds
    /// `target/debug/collector`).
    ///
    /// # Errors
    /// None found: build it first (`cargo build --release -p collector`).
    pub fn locate() -> anyhow::Result<PathBuf> {
        if let Some(path) = std::env::var_os("TETHER_COLLECTOR_BIN") {
            return Ok(PathBuf::from(path));
        }
        let exe = std::env::current_exe().context("locating the running executable")?;
        exe.ancestors()
            .skip(1)
            .map(|dir| dir.join("collector"))
            .find(|candidate| candidate.is_file())
            .with_context(|| {
                format!(
                    "no collector binary near {} (build it with `cargo build -p collector`, \
                     or set TETHER_COLLECTOR_BIN)",
                    exe.display()
                )
            })
    }

    /// Spawns `bin` against `control_plane` (members from Karmada `Cluster`s, status written
    /// back) with its own credential in a token file, a `probe_period`, JSON logs at `info`,
    /// and waits until `/healthz` answers.
    ///
    /// # Errors
    /// Spawning fails, or `/healthz` does not answer within 30 s.
    pub async fn start(
        bin: &Path,
        control_plane: &testkit::Cluster,
        probe_period: Duration,
    ) -> anyhow::Result<Self> {
        let log_dir = std::env::temp_dir().join(format!(
            "tether-scale-bench-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis())
        ));
        std::fs::create_dir_all(&log_dir)?;
        let token = control_plane
            .admin_config()
            .auth_info
            .token
            .as_ref()
            .context("the harness admin config has a token")?
            .expose_secret()
            .to_owned();
        let token_file = log_dir.join("control-plane-token");
        std::fs::write(&token_file, token)?;
        let ca_file = log_dir.join("control-plane-ca.crt");
        std::fs::write(&ca_file, control_plane.ca_pem())?;
        let addr = testkit::free_loopback_addr()?;
        let stderr = std::fs::File::create(log_dir.join("collector.stderr"))?;
        let started = Instant::now();
        let mut child = Command::new(bin)
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--members-from")
            .arg("karmada")
            .arg("--control-plane-url")
            .arg(control_plane.endpoint())
            .arg("--control-plane-token-file")
            .arg(&token_file)
            .arg("--control-plane-ca-file")
            .arg(&ca_file)
            .arg("--probe-period")
            .arg(probe_period.as_secs().max(1).to_string())
            .arg("--log-format")
            .arg("json")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("spawning {}", bin.display()))?;
        let stdout = child.stdout.take().context("the child has no stdout")?;
        let log = Arc::new(Mutex::new(LogState::default()));
        let log_file = std::fs::File::create(log_dir.join("collector.log"))?;
        let state = Arc::clone(&log);
        std::thread::spawn(move || read_log(BufReader::new(stdout), log_file, &state));
        let running = Self {
            child,
            addr,
            started,
            log,
            log_dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while running.get("/healthz").await.is_err() {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the collector did not serve /healthz within 30 s (logs in {})",
                running.log_dir.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(running)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// `GET path`: status and body.
    ///
    /// # Errors
    /// Connection errors.
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        testkit::http_get(self.addr, path).await
    }

    /// `GET /metrics`.
    ///
    /// # Errors
    /// Connection errors or a status other than 200.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        let (status, body) = self.get("/metrics").await?;
        anyhow::ensure!(status == 200, "GET /metrics: {status}");
        Ok(body)
    }

    /// Forgets the rotations logged so far.
    pub fn clear_rotations(&self) {
        self.lock().rotated.clear();
    }

    /// Member → when the collector logged its rotation, since the last
    /// [`clear_rotations`](Self::clear_rotations).
    pub fn rotations(&self) -> HashMap<String, SystemTime> {
        self.lock().rotated.clone()
    }

    /// Warning and error messages logged so far, with counts.
    pub fn warnings(&self) -> BTreeMap<String, u64> {
        self.lock().warnings.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for CollectorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Copies the child's stdout to `file` and records rotations and warnings, until EOF.
fn read_log(stdout: impl BufRead, mut file: std::fs::File, state: &Mutex<LogState>) {
    for line in stdout.lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(file, "{line}");
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let message = entry["fields"]["message"].as_str().unwrap_or_default();
        let level = entry["level"].as_str().unwrap_or_default();
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        if message == ROTATED_MESSAGE
            && let Some(member) = entry["fields"]["member"].as_str()
        {
            let at = entry["timestamp"]
                .as_str()
                .and_then(|t| t.parse::<Timestamp>().ok())
                .map_or_else(SystemTime::now, SystemTime::from);
            state.rotated.entry(member.to_owned()).or_insert(at);
        } else if level == "WARN" || level == "ERROR" {
            *state
                .warnings
                .entry(format!("{level} {message}"))
                .or_default() += 1;
        }
    }
}
