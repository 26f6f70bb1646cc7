//! [`Environment`]: one etcd and N kube-apiservers ("clusters") on loopback.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use tempfile::TempDir;

use crate::apiserver::{Apiserver, ApiserverSpec};
use crate::assets::Assets;
use crate::cluster::Cluster;
use crate::config::Config;
use crate::etcd::Etcd;
use crate::federation::{self, Federation, MemberTrust};
use crate::pki::TestCa;
use crate::ports::{free_ports, port_is_free, wait_port_free};

/// Index of the control plane in [`Environment::clusters`].
pub const CONTROL_PLANE: usize = 0;

/// How long a stopped apiserver gets for a graceful exit before SIGKILL. Its graceful shutdown
/// waits 30–60 s for open watches, which no test wants to sit through.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// How long a stopped apiserver's port may stay bound after its process is reaped.
const PORT_RELEASE: Duration = Duration::from_secs(10);

/// What [`Environment::restart`] changes besides the process.
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct RestartOptions {
    /// Serve a new certificate signed by a new CA (CA rotation). The ServiceAccount signing
    /// key never changes, so tokens minted before the restart stay valid.
    pub new_ca: bool,
}

impl RestartOptions {
    /// Restart with a new CA.
    pub fn new_ca() -> Self {
        Self { new_ca: true }
    }
}

/// One etcd and N kube-apiservers on 127.0.0.1, each apiserver a "cluster".
///
/// Index [`CONTROL_PLANE`] (0) is `control-plane`, the rest are `member1`, `member2`, …
/// Each cluster has its own etcd prefix (`/<name>`), its own serving certificate from its own
/// test CA, its own client CA (`--client-ca-file`), its own ServiceAccount signing key and
/// issuer (`https://<name>.test`), so a token or client certificate from one cluster is
/// rejected (401) by every other.
///
/// # Drop
/// Dropping the environment SIGKILLs every apiserver, then etcd, and reaps them (also while a
/// test panics), then removes the temporary directory. If the thread is panicking, the directory
/// (logs, certificates, etcd data) is kept and its path printed to stderr.
///
/// # Memory usage
/// About 290 MB RSS per apiserver, plus etcd.
#[derive(Debug)]
pub struct Environment {
    clusters: Vec<Cluster>,
    slots: Vec<Slot>,
    etcd: Option<Etcd>,
    assets: Assets,
    ready_timeout: Duration,
    /// Flags every apiserver gets besides the harness's own.
    apiserver_flags: Vec<String>,
    cluster_apiserver_flags: Vec<(String, String)>,
    /// Set if members trust the control plane's ServiceAccount issuer.
    pub(crate) federation: Option<Federation>,
    /// `None` only while dropping.
    dir: Option<TempDir>,
}

/// The process side of one cluster.
#[derive(Debug)]
struct Slot {
    spec: ApiserverSpec,
    /// Written once to its `client-ca-file`; never rotated, so restarts keep client certificates.
    client_ca: Arc<TestCa>,
    server: Option<Apiserver>,
    /// How many times its apiserver was started; numbers the log files.
    runs: u32,
    /// What its authentication configuration says (members of a federated environment only).
    trust: MemberTrust,
}

impl Environment {
    /// Starts a control plane and `members` member clusters with the default [`Config`].
    pub async fn with_members(members: usize) -> Result<Self> {
        Config::default().members(members).start().await
    }

    pub(crate) async fn start_with(config: Config) -> Result<Self> {
        federation::check_flags(&config)?;
        let assets = match config.assets {
            Some(a) => a,
            // It may run `hack/envtest.sh`, which may build for minutes: keep it off the runtime.
            None => tokio::task::spawn_blocking(Assets::locate)
                .await
                .context("locating the binaries panicked")??,
        };
        let dir = tempfile::Builder::new()
            .prefix("tether-testkit-")
            .tempdir()
            .context("creating the environment's temporary directory")?;
        let etcd = match Etcd::start(&assets, dir.path(), config.ready_timeout).await {
            Ok(etcd) => etcd,
            Err(e) => {
                let kept = dir.keep();
                return Err(e.context(format!("starting etcd (logs kept in {})", kept.display())));
            }
        };

        let names: Vec<String> = std::iter::once("control-plane".to_owned())
            .chain((1..=config.members).map(|i| format!("member{i}")))
            .collect();
        let ports = free_ports(names.len())?;
        let mut env = Self {
            clusters: Vec::with_capacity(names.len()),
            slots: Vec::with_capacity(names.len()),
            etcd: Some(etcd),
            assets,
            ready_timeout: config.ready_timeout,
            apiserver_flags: config.apiserver_flags,
            cluster_apiserver_flags: config.cluster_apiserver_flags,
            federation: config.federation,
            dir: Some(dir),
        };
        match env.boot(names, ports).await {
            Ok(()) => Ok(env),
            Err(e) => {
                // Keep the logs the error points at; `Drop` still stops the processes.
                let kept = env.dir.take().map(TempDir::keep);
                Err(match kept {
                    Some(dir) => e.context(format!(
                        "starting the environment (logs kept in {})",
                        dir.display()
                    )),
                    None => e,
                })
            }
        }
    }

    async fn boot(&mut self, names: Vec<String>, ports: Vec<u16>) -> Result<()> {
        for (name, port) in names.into_iter().zip(ports) {
            self.add_cluster(name, port)?;
        }
        let all = self.slots.len();
        if self.federation.is_none() {
            return self.spawn_and_wait(CONTROL_PLANE..all).await;
        }
        // A member fetches the control plane's discovery document as it starts and retries
        // only every 10 s: serve it first, so members trust it from their start.
        self.spawn_and_wait(CONTROL_PLANE..CONTROL_PLANE + 1)
            .await?;
        federation::prepare_control_plane(self.control_plane()).await?;
        self.spawn_and_wait(CONTROL_PLANE + 1..all).await?;
        for index in CONTROL_PLANE + 1..all {
            self.wait_member_trust(index, true, self.ready_timeout)
                .await?;
        }
        Ok(())
    }

    /// Spawns the apiservers of `clusters` at once, then waits for each: they boot
    /// concurrently.
    async fn spawn_and_wait(&mut self, clusters: Range<usize>) -> Result<()> {
        for slot in &mut self.slots[clusters.clone()] {
            slot.runs += 1;
            slot.server = Some(Apiserver::spawn(&self.assets, &slot.spec, slot.runs)?);
        }
        let slots = self.slots[clusters.clone()].iter_mut();
        for (slot, cluster) in slots.zip(&self.clusters[clusters]) {
            if let Some(server) = &mut slot.server {
                server.wait_ready(cluster, self.ready_timeout).await?;
            }
        }
        Ok(())
    }

    /// Writes one cluster's keys, certificates and token file, and registers it (not started).
    fn add_cluster(&mut self, name: String, port: u16) -> Result<()> {
        let admin_token = admin_token(&name);
        // Its own CA, not the serving one: `RestartOptions::new_ca` rotates that, and client
        // certificates issued before a rotation must keep working.
        let client_ca = Arc::new(TestCa::generate(&format!("{name} client CA"))?);
        let etcd = self.etcd()?.endpoint();
        let mut spec =
            ApiserverSpec::create(self.dir()?, &name, port, etcd, &admin_token, &client_ca)?;
        // Before the caller's flags, which may override them.
        if let Some(federation) = &self.federation {
            match self.clusters.first() {
                None => federation::configure_control_plane(&mut spec),
                Some(cp) => federation::configure_member(&mut spec, federation, cp)?,
            }
        }
        spec.extra_flags
            .extend(self.apiserver_flags.iter().cloned());
        let own = self.cluster_apiserver_flags.iter();
        let own = own.filter(|(cluster, _)| *cluster == name);
        spec.extra_flags.extend(own.map(|(_, flag)| flag.clone()));
        let ca = spec.issue_serving_cert()?;
        let endpoint = format!("https://127.0.0.1:{port}");
        let cluster = Cluster::with_admin_token(&name, &endpoint, &ca.pem(), &admin_token)?
            .with_client_ca(Arc::clone(&client_ca));
        self.clusters.push(cluster);
        self.slots.push(Slot {
            spec,
            client_ca,
            server: None,
            runs: 0,
            trust: MemberTrust::default(),
        });
        Ok(())
    }

    /// Every cluster, the control plane first.
    pub fn clusters(&self) -> &[Cluster] {
        &self.clusters
    }

    /// The cluster at `index` ([`CONTROL_PLANE`] is 0, `memberN` is N).
    ///
    /// # Panics
    /// If there is no such cluster.
    pub fn cluster(&self, index: usize) -> &Cluster {
        &self.clusters[index]
    }

    /// The control plane (`control-plane`).
    pub fn control_plane(&self) -> &Cluster {
        self.cluster(CONTROL_PLANE)
    }

    /// The member clusters, `member1` first.
    pub fn members(&self) -> &[Cluster] {
        &self.clusters[1..]
    }

    /// The running apiserver of cluster `index`; `None` while it is stopped or out of range.
    pub fn apiserver(&self, index: usize) -> Option<&Apiserver> {
        self.slots.get(index)?.server.as_ref()
    }

    /// The shared etcd.
    ///
    /// # Errors
    /// Never while the environment is alive (the field is only emptied by `Drop`).
    pub fn etcd(&self) -> Result<&Etcd> {
        self.etcd.as_ref().context("etcd is gone")
    }

    /// The temporary directory holding every log (`etcd.log`, `<cluster>/apiserver-<run>.log`),
    /// certificate, key and the etcd data.
    ///
    /// # Errors
    /// Never while the environment is alive.
    pub fn dir(&self) -> Result<&Path> {
        Ok(self.dir.as_ref().context("directory is gone")?.path())
    }

    /// Stops cluster `index`'s apiserver, so it is unreachable (connection refused):
    /// SIGTERM, at most 2 s grace, SIGKILL, wait until the process is reaped and its port free.
    ///
    /// # Errors
    /// If it is not running, or its port stays bound for 10 s.
    pub async fn stop(&mut self, index: usize) -> Result<()> {
        let slot = self.slot(index)?;
        let name = slot.spec.name();
        let Some(mut server) = slot.server.take() else {
            bail!("{name} is not running");
        };
        server.stop(STOP_GRACE).await?;
        wait_port_free(slot.spec.port(), PORT_RELEASE)
            .await
            .with_context(|| format!("stopping {name}"))?;
        Ok(())
    }

    /// Starts cluster `index`'s apiserver again, on the same port with the same keys, and waits
    /// until it is ready.
    ///
    /// # Errors
    /// If it is running, its port is taken, or it is not ready in time (see [`Config::start`]).
    pub async fn start(&mut self, index: usize) -> Result<()> {
        let timeout = self.ready_timeout;
        let cluster = self.cluster_at(index)?.clone();
        let assets = self.assets.clone();
        let slot = self.slot(index)?;
        let (name, port) = (slot.spec.name(), slot.spec.port());
        ensure!(slot.server.is_none(), "{name} is already running");
        ensure!(
            port_is_free(port),
            "cannot start {name}: 127.0.0.1:{port} is in use"
        );
        slot.runs += 1;
        let mut server = Apiserver::spawn(&assets, &slot.spec, slot.runs)?;
        server.wait_ready(&cluster, timeout).await?;
        slot.server = Some(server);
        Ok(())
    }

    /// Stops and starts cluster `index`'s apiserver on the same port (see [`stop`](Self::stop)
    /// and [`start`](Self::start)). Open watches end; clients must reconnect.
    ///
    /// With [`RestartOptions::new_ca`] it serves a certificate from a new CA: get the new bundle
    /// from [`cluster(index)`](Self::cluster)`.ca_pem()`. Tokens and client certificates
    /// ([`Cluster::issue_client_cert`]) stay valid either way: the client CA never changes.
    /// If members trust the control plane and it gets a new CA, their authentication
    /// configurations are rewritten with it; they reload them by themselves, ~10 s later.
    ///
    /// # Errors
    /// As [`stop`](Self::stop) and [`start`](Self::start).
    pub async fn restart(&mut self, index: usize, options: RestartOptions) -> Result<()> {
        self.stop(index).await?;
        if options.new_ca {
            let slot = self.slot(index)?;
            let ca = slot.spec.issue_serving_cert()?;
            let client_ca = Arc::clone(&slot.client_ca);
            let old = self.cluster_at(index)?;
            let token = old.admin_token()?;
            self.clusters[index] =
                Cluster::with_admin_token(old.name(), old.endpoint(), &ca.pem(), &token)?
                    .with_client_ca(client_ca);
        }
        self.start(index).await?;
        if options.new_ca && index == CONTROL_PLANE {
            self.rewrite_member_configs()?;
        }
        Ok(())
    }

    fn slot_ref(&self, index: usize) -> Result<&Slot> {
        let n = self.slots.len();
        self.slots
            .get(index)
            .with_context(|| format!("no cluster {index} (there are {n})"))
    }

    fn slot(&mut self, index: usize) -> Result<&mut Slot> {
        let n = self.slots.len();
        self.slots
            .get_mut(index)
            .with_context(|| format!("no cluster {index} (there are {n})"))
    }

    /// The files and flags of cluster `index`'s apiserver.
    pub(crate) fn spec(&self, index: usize) -> Result<&ApiserverSpec> {
        Ok(&self.slot_ref(index)?.spec)
    }

    /// What member `index`'s authentication configuration says, as last written.
    pub(crate) fn trust_state(&self, index: usize) -> Result<MemberTrust> {
        Ok(self.slot_ref(index)?.trust)
    }

    pub(crate) fn set_trust_state(&mut self, index: usize, trust: MemberTrust) -> Result<()> {
        self.slot(index)?.trust = trust;
        Ok(())
    }

    fn cluster_at(&self, index: usize) -> Result<&Cluster> {
        self.clusters
            .get(index)
            .with_context(|| format!("no cluster {index}"))
    }
}

impl Drop for Environment {
    fn drop(&mut self) {
        // Apiservers before etcd: an apiserver that loses etcd first can hang in shutdown.
        for slot in &mut self.slots {
            if let Some(server) = &mut slot.server {
                server.kill_now();
            }
        }
        if let Some(etcd) = &mut self.etcd {
            etcd.kill_now();
        }
        if let Some(dir) = self.dir.take()
            && std::thread::panicking()
        {
            let kept = dir.keep();
            eprintln!("testkit: test panicked; logs kept in {}", kept.display());
        }
    }
}

/// A per-cluster admin token; unguessable enough for a loopback test server.
fn admin_token(cluster: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("testkit-admin-{cluster}-{:x}-{nanos:x}", std::process::id())
}
