//! Which exec plugins a member definition may name, how each is invoked, and how long one may
//! run.

use std::{
    ffi::OsStr,
    fmt,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    str::FromStr,
    sync::Arc,
    time::Duration,
};

use crate::Text;

use super::{ExecConfig, ExecError, PluginDeclaration, plugin_declaration::Invocation};

/// The operator's exec plugins (`--exec-plugins FILE`, `--allow-exec PATH`), the user they run
/// as, and the limits of a run.
///
/// Member definitions are not trusted to run programs: a plugin runs only if its command
/// resolves to exactly one of the declared files, and only with the arguments and variables
/// its [`PluginDeclaration`] accepts. Paths are canonicalized when a declaration is made, and
/// the command is canonicalized when it is checked, so a symlink, `..` or a different spelling
/// of a path reaches only the file it points at. A path that does not exist when the
/// declaration is made never matches (see [`unresolved`](Self::unresolved)).
///
/// Cloning is cheap: the declarations are shared.
///
/// ```no_run
/// use std::time::Duration;
/// use member_client::exec::ExecPolicy;
/// let policy = ExecPolicy::new(["/usr/local/bin/cloud-auth".into()])
///     .with_timeout(Duration::from_secs(10));
/// let path = policy.allowed("/usr/local/bin/cloud-auth")?;
/// # Ok::<(), member_client::exec::ExecError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ExecPolicy {
    plugins: Arc<[Arc<PluginDeclaration>]>,
    timeout: Duration,
    run_as: Option<RunAs>,
    /// Plugin processes that may run at once, shared by every clone of the policy.
    permits: Arc<tokio::sync::Semaphore>,
}

impl ExecPolicy {
    /// How long a run may take when [`with_timeout`](Self::with_timeout) is not called.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// The most a plugin may write to stdout, in bytes (1 MiB; an ExecCredential with a client
    /// certificate chain is a few KiB).
    pub const MAX_STDOUT: usize = 1024 * 1024;
    /// The most of a plugin's stderr kept, in bytes: its end, which says why it failed.
    pub const MAX_STDERR: usize = 64 * 1024;
    /// Plugins run at once when [`with_max_concurrent`](Self::with_max_concurrent) is not
    /// called.
    pub const DEFAULT_MAX_CONCURRENT: usize = 16;

    /// A policy that allows the given plugin paths as `--allow-exec` does: each alone, with no
    /// fixed argument or variable, accepting no argument and no variable from a definition
    /// ([`PluginDeclaration::command_only`]).
    ///
    /// Each path is canonicalized now. A path that cannot be (it does not exist, say) is kept
    /// in [`unresolved`](Self::unresolved) and never matches: whatever appears there later was
    /// not vetted by whoever wrote the flag.
    pub fn new(allowed: impl IntoIterator<Item = PathBuf>) -> Self {
        Self::declaring(allowed.into_iter().map(PluginDeclaration::command_only))
    }

    /// A policy that allows the declared plugins. Of two declarations of one file the first
    /// wins, except that a full declaration replaces a bare `--allow-exec` one.
    pub fn declaring(declarations: impl IntoIterator<Item = PluginDeclaration>) -> Self {
        Self {
            plugins: Arc::from([]),
            timeout: Self::DEFAULT_TIMEOUT,
            run_as: None,
            permits: Arc::new(tokio::sync::Semaphore::new(Self::DEFAULT_MAX_CONCURRENT)),
        }
        .also_declaring(declarations)
    }

    /// This policy, also allowing `more` as [`new`](Self::new) does.
    #[must_use]
    pub fn also_allowing(self, more: impl IntoIterator<Item = PathBuf>) -> Self {
        self.also_declaring(more.into_iter().map(PluginDeclaration::command_only))
    }

    /// This policy, also allowing the declared plugins as [`declaring`](Self::declaring) does.
    #[must_use]
    pub fn also_declaring(self, more: impl IntoIterator<Item = PluginDeclaration>) -> Self {
        let mut all: Vec<Arc<PluginDeclaration>> = self.plugins.to_vec();
        for declaration in more {
            let same = |d: &Arc<PluginDeclaration>| match (d.resolved(), declaration.resolved()) {
                (Some(a), Some(b)) => a == b,
                _ => d.command() == declaration.command(),
            };
            match all.iter_mut().find(|d| same(d)) {
                Some(bare) if bare.is_bare() && !declaration.is_bare() => {
                    *bare = Arc::new(declaration);
                }
                Some(_) => {}
                None => all.push(Arc::new(declaration)),
            }
        }
        Self {
            plugins: all.into(),
            ..self
        }
    }

    /// This policy's limits, allowing `declaration` alone: how a ClusterProfile's provider is
    /// run, chosen by name rather than by command.
    #[must_use]
    pub fn only(&self, declaration: Arc<PluginDeclaration>) -> Self {
        Self {
            plugins: Arc::from([declaration]),
            ..self.clone()
        }
    }

    /// A policy that refuses every plugin: what members get unless the operator opts in.
    pub fn none() -> Self {
        Self::new([])
    }

    /// Bounds each run (spawn, output and exit) by `timeout`.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs at most `max` plugin processes at once (at least one), across every member and
    /// every clone of this policy (`--exec-max-concurrent`). A run waits for its turn within
    /// its own [`timeout`](Self::timeout): one that waits too long is `TimedOut`.
    #[must_use]
    pub fn with_max_concurrent(mut self, max: usize) -> Self {
        self.permits = Arc::new(tokio::sync::Semaphore::new(max.max(1)));
        self
    }

    /// A turn to run a plugin: held for the run, then given back.
    #[cfg(all(feature = "exec", unix))]
    pub(super) async fn turn(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        // The semaphore is never closed.
        self.permits.acquire().await.ok()
    }

    /// Runs every plugin as `run_as` (`--exec-run-as`) instead of the collector's own user.
    #[must_use]
    pub fn with_run_as(mut self, run_as: Option<RunAs>) -> Self {
        self.run_as = run_as;
        self
    }

    /// How long a run may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The user plugins run as; `None`: the collector's own.
    pub fn run_as(&self) -> Option<RunAs> {
        self.run_as
    }

    /// Whether any plugin may run at all.
    pub fn allows_any(&self) -> bool {
        self.plugins.iter().any(|d| d.resolved().is_some())
    }

    /// The allowed plugins, canonicalized.
    pub fn allowed_paths(&self) -> Vec<PathBuf> {
        (self.plugins.iter())
            .filter_map(|d| d.resolved().map(Path::to_path_buf))
            .collect()
    }

    /// The paths given that could not be canonicalized, and so never match; worth a warning
    /// at start-up.
    pub fn unresolved(&self) -> Vec<PathBuf> {
        (self.plugins.iter())
            .filter(|d| d.resolved().is_none())
            .map(|d| d.command().to_path_buf())
            .collect()
    }

    /// The allowed file `command` resolves to: an absolute path is canonicalized; a bare name
    /// is looked up on the collector's `PATH` as Go's `exec.LookPath` does (the first
    /// executable regular file wins), except that empty and relative `PATH` entries are
    /// skipped, as Go does since 1.19. The result is canonicalized and must equal an allowed
    /// path.
    ///
    /// This reads the file system; from async code prefer [`run`](super::run), which does it
    /// off the async workers.
    ///
    /// # Errors
    /// [`ExecError::NotAllowed`].
    pub fn allowed(&self, command: &str) -> Result<PathBuf, ExecError> {
        self.allowed_on(command, std::env::var_os("PATH").as_deref())
    }

    /// What [`run`](super::run) checks before it starts anything: the command is
    /// [`allowed`](Self::allowed), and its declaration accepts every argument and variable
    /// the definition passes. Admission can call this to refuse a definition early.
    ///
    /// # Errors
    /// [`ExecError::NotAllowed`], [`ExecError::ArgNotAllowed`] and
    /// [`ExecError::EnvNotAllowed`]; none of them quotes an argument or a value.
    pub fn check(&self, config: &ExecConfig) -> Result<PathBuf, ExecError> {
        self.invocation(config).map(|invocation| invocation.path)
    }

    /// The checked invocation: see [`check`](Self::check).
    pub(crate) fn invocation(&self, config: &ExecConfig) -> Result<Invocation, ExecError> {
        let (path, declaration) =
            self.declared_on(&config.command, std::env::var_os("PATH").as_deref())?;
        declaration.invocation(path, config)
    }

    fn allowed_on(&self, command: &str, path_var: Option<&OsStr>) -> Result<PathBuf, ExecError> {
        self.declared_on(command, path_var).map(|(path, _)| path)
    }

    fn declared_on(
        &self,
        command: &str,
        path_var: Option<&OsStr>,
    ) -> Result<(PathBuf, &PluginDeclaration), ExecError> {
        let refused = || ExecError::NotAllowed {
            command: Text::new(command),
        };
        if !self.allows_any() {
            return Err(refused());
        }
        let found = if command.contains('/') {
            Some(PathBuf::from(command)).filter(|path| path.is_absolute())
        } else {
            look_path(command, path_var)
        };
        let canonical = found
            .and_then(|path| std::fs::canonicalize(path).ok())
            .ok_or_else(refused)?;
        (self.plugins.iter())
            .find(|d| d.resolved() == Some(canonical.as_path()))
            .map(|d| (canonical.clone(), &**d))
            .ok_or_else(refused)
    }
}

impl Default for ExecPolicy {
    fn default() -> Self {
        Self::none()
    }
}

fn look_path(name: &str, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if name.is_empty() {
        return None;
    }
    // A relative entry (or an empty one, which means ".") would resolve against the working
    // directory: https://go.dev/blog/path-security.
    std::env::split_paths(path_var?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The user and group an exec plugin runs as, when it must not run as the collector: a
/// plugin run as another UID cannot read files only the collector's UID may read, such as
/// its ServiceAccount token mounted with mode 0400.
///
/// Starting a plugin as another user needs `CAP_SETUID` and `CAP_SETGID`, and giving it its
/// private `HOME` needs `CAP_CHOWN`. The plugin keeps no supplementary group.
///
/// ```
/// use member_client::exec::RunAs;
/// let run_as: RunAs = "65534".parse().unwrap();
/// assert_eq!((run_as.uid, run_as.gid), (65534, 65534));
/// let run_as: RunAs = "1000:2000".parse().unwrap();
/// assert_eq!((run_as.uid, run_as.gid), (1000, 2000));
/// for bad in ["0", "10:0", "nobody", "-1", "", ":5"] {
///     assert!(bad.parse::<RunAs>().is_err(), "{bad}");
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RunAs {
    /// The plugin's user ID.
    pub uid: u32,
    /// The plugin's group ID.
    pub gid: u32,
}

impl FromStr for RunAs {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let number = |part: &str, what: &str| {
            part.parse::<u32>()
                .map_err(|_| format!("{what} {part:?} is not a number (UID[:GID])"))
        };
        let (uid, gid) = match raw.split_once(':') {
            Some((uid, gid)) => (number(uid, "UID")?, number(gid, "GID")?),
            None => {
                let uid = number(raw, "UID")?;
                (uid, uid)
            }
        };
        // Root, as a plugin's user or group, would undo the point.
        if uid == 0 || gid == 0 {
            return Err("exec plugins may not run as UID or GID 0".to_owned());
        }
        Ok(Self { uid, gid })
    }
}

impl fmt::Display for RunAs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.uid, self.gid)
    }
}

#[cfg(test)]
mod tests;
