//! The collector as the bench runs it (a [`testkit::CollectorProcess`], so that `/proc/<pid>`
//! gives its own RSS and CPU), with its JSON log read line by line.
//!
//! The log is how a rotation is timed per member: the supervisor logs `credentials rotated`
//! (with `member`) when it receives the registry's `CredentialsRotated`, which the registry
//! sends only after it has invalidated that member's token-cache entry. From that instant the
//! member's next request fetches the new token from the in-memory Secret store. The log line's
//! own timestamp (wall clock, same machine as the bench) is used, not when the bench read it.

use std::{
    collections::{BTreeMap, HashMap},
    io::{BufRead, BufReader, Write as _},
    path::Path,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, SystemTime},
};

use anyhow::Context as _;
use k8s_openapi::jiff::Timestamp;
use testkit::CollectorProcess;

/// The log message that marks a member's token-cache entry as switched to the new Secret.
pub const ROTATED_MESSAGE: &str = "credentials rotated";

/// How long the collector may take to serve `/healthz`.
const START_LIMIT: Duration = Duration::from_secs(30);

/// What the bench reads from the collector's log.
#[derive(Debug, Default)]
struct LogState {
    /// Member → when the collector logged its rotation (first since the last clear).
    rotated: HashMap<String, SystemTime>,
    /// Warnings and errors by message, for the report.
    warnings: BTreeMap<String, u64>,
}

/// What a running collector has logged so far; a clone reads the same log.
#[derive(Clone, Debug, Default)]
pub struct CollectorLog {
    state: Arc<Mutex<LogState>>,
}

/// Spawns `bin` against `control_plane` (members from Karmada `Cluster`s, status written back)
/// with the admin token as its own credential, a `probe_period`, JSON logs and `extra` flags,
/// copies its stdout to `collector.log` in a fresh log directory while reading it into a
/// [`CollectorLog`], and waits until `/healthz` answers.
///
/// # Errors
/// Spawning fails, or `/healthz` does not answer within 30 s.
pub async fn start_collector(
    bin: &Path,
    control_plane: &testkit::Cluster,
    probe_period: Duration,
    extra: &[String],
) -> anyhow::Result<(CollectorProcess, CollectorLog)> {
    // Kept after the run, as the collector's logs.
    let log_dir = tempfile::Builder::new()
        .prefix("tether-scale-bench-")
        .tempdir()?
        .keep();
    let mut args = vec!["--members-from".to_owned(), "karmada".to_owned()];
    args.extend(testkit::control_plane_flags(
        control_plane,
        &control_plane.admin_token()?,
        &log_dir,
    )?);
    args.extend([
        "--probe-period".to_owned(),
        probe_period.as_secs().max(1).to_string(),
        "--log-format".to_owned(),
        "json".to_owned(),
        // The bench scrapes /metrics on loopback without a token and measures the collector,
        // not the control plane's access reviews.
        "--insecure-serve-api".to_owned(),
    ]);
    args.extend(extra.iter().cloned());
    let mut process = CollectorProcess::spawn(bin, &args, &log_dir)?;
    let stdout = process.take_stdout().context("the child has no stdout")?;
    let log = CollectorLog::default();
    let log_file = std::fs::File::create(log_dir.join("collector.log"))?;
    let state = Arc::clone(&log.state);
    std::thread::spawn(move || read_log(BufReader::new(stdout), log_file, &state));
    process.wait_until_healthy(START_LIMIT).await?;
    Ok((process, log))
}

impl CollectorLog {
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
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
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
            let key = format!("{level} {message}");
            *state.warnings.entry(key).or_default() += 1;
        }
    }
}
