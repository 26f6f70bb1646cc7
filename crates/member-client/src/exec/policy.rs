//! Which exec plugins a member definition may name, how each is invoked, and how long one may
//! run.

use std::{
    ffi::OsStr,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use crate::Text;

use super::{ExecConfig, ExecError, PluginDeclaration, RunAs, plugin_declaration::Invocation};

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
/// use member_client::ExecPolicy;
/// let policy = ExecPolicy::new(["/usr/local/bin/cloud-auth".into()])
///     .with_timeout(Duration::from_secs(10));
/// let path = policy.allowed("/usr/local/bin/cloud-auth")?;
/// # Ok::<(), member_client::ExecError>(())
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
            timeout: self.timeout,
            run_as: self.run_as,
            permits: self.permits.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{DefinitionRules, EnvRule, ExecApiVersion, ExecEnvVar, Pattern};
    use rstest::rstest;
    use std::{ffi::OsString, fs};

    /// A temp dir with executable files; `sub/` and `other/` hold more.
    struct Tree(tempfile::TempDir);

    impl Tree {
        fn new() -> Self {
            let tree = Self(tempfile::tempdir().unwrap());
            fs::create_dir(tree.path("sub")).unwrap();
            fs::create_dir(tree.path("other")).unwrap();
            tree
        }

        fn path(&self, rel: &str) -> PathBuf {
            fs::canonicalize(self.0.path()).unwrap().join(rel)
        }

        fn file(&self, rel: &str, mode: u32) -> PathBuf {
            let path = self.path(rel);
            fs::write(&path, "#!/bin/sh\n").unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            path
        }

        fn path_var(&self, dirs: &[&str]) -> OsString {
            std::env::join_paths(dirs.iter().map(|dir| self.path(dir))).unwrap()
        }
    }

    fn refused(result: Result<PathBuf, ExecError>) -> bool {
        matches!(result, Err(ExecError::NotAllowed { .. }))
    }

    #[test]
    fn an_allowed_absolute_path_resolves_to_itself() {
        let tree = Tree::new();
        let plugin = tree.file("plugin", 0o755);
        let policy = ExecPolicy::new([plugin.clone()]);
        assert_eq!(policy.allowed(plugin.to_str().unwrap()).unwrap(), plugin);
    }

    #[test]
    fn also_allowing_adds_paths_and_keeps_the_timeout() {
        let tree = Tree::new();
        let (first, second) = (tree.file("plugin", 0o755), tree.file("other/p", 0o755));
        let policy = ExecPolicy::new([first.clone()])
            .with_timeout(Duration::from_secs(3))
            .also_allowing([second.clone(), first.clone(), tree.path("missing")]);
        assert_eq!(policy.allowed_paths(), [first.clone(), second.clone()]);
        assert_eq!(policy.unresolved(), [tree.path("missing")]);
        assert_eq!(policy.timeout(), Duration::from_secs(3));
        assert!(policy.allowed(second.to_str().unwrap()).is_ok());
        assert!(refused(
            ExecPolicy::new([first]).allowed(second.to_str().unwrap())
        ));
    }

    #[test]
    fn another_spelling_of_an_allowed_path_resolves_to_it() {
        let tree = Tree::new();
        let plugin = tree.file("plugin", 0o755);
        let policy = ExecPolicy::new([plugin.clone()]);
        let spelled = format!("{}/sub/../plugin", tree.path("").display());
        assert_eq!(policy.allowed(&spelled).unwrap(), plugin);
    }

    #[test]
    fn an_allowed_symlink_allows_its_target() {
        let tree = Tree::new();
        let target = tree.file("plugin", 0o755);
        let link = tree.path("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let policy = ExecPolicy::new([link]);
        assert_eq!(policy.allowed_paths(), std::slice::from_ref(&target));
        assert_eq!(policy.allowed(target.to_str().unwrap()).unwrap(), target);
    }

    #[test]
    fn a_symlink_to_another_file_is_refused() {
        let tree = Tree::new();
        let allowed = tree.file("plugin", 0o755);
        let other = tree.file("other/evil", 0o755);
        // Named like the allowed plugin, in a directory of its own.
        let link = tree.path("sub/plugin");
        std::os::unix::fs::symlink(&other, &link).unwrap();
        let policy = ExecPolicy::new([allowed]);
        assert!(refused(policy.allowed(link.to_str().unwrap())));
    }

    #[test]
    fn a_relative_path_is_refused_even_when_it_reaches_an_allowed_file() {
        let tree = Tree::new();
        let plugin = tree.file("plugin", 0o755);
        let policy = ExecPolicy::new([plugin.clone()]);
        // Enough `..` to reach `/` from any working directory a test runs in.
        let relative = format!("{}{}", "../".repeat(64), plugin.display());
        assert_eq!(
            fs::canonicalize(&relative).unwrap(),
            plugin,
            "the relative path must reach the plugin for this test to mean anything"
        );
        assert!(refused(policy.allowed(&relative)));
        assert!(refused(policy.allowed("./plugin")));
    }

    #[test]
    fn a_bare_name_takes_the_first_executable_file_on_path() {
        let tree = Tree::new();
        tree.file("sub/plugin", 0o644); // not executable: skipped
        let plugin = tree.file("other/plugin", 0o755);
        let policy = ExecPolicy::new([plugin.clone()]);
        let path_var = tree.path_var(&["sub", "other"]);
        assert_eq!(
            policy.allowed_on("plugin", Some(&path_var)).unwrap(),
            plugin
        );
    }

    #[test]
    fn a_bare_name_shadowed_on_path_is_refused() {
        let tree = Tree::new();
        tree.file("sub/plugin", 0o755); // found first, so it is what would run
        let plugin = tree.file("other/plugin", 0o755);
        let policy = ExecPolicy::new([plugin]);
        let path_var = tree.path_var(&["sub", "other"]);
        assert!(refused(policy.allowed_on("plugin", Some(&path_var))));
    }

    #[test]
    fn relative_path_entries_are_skipped() {
        let tree = Tree::new();
        let plugin = tree.file("sub/plugin", 0o755);
        let policy = ExecPolicy::new([plugin]);
        // Relative, but reaches `sub/` from any working directory a test runs in.
        let relative = format!("{}{}", "../".repeat(64), tree.path("sub").display());
        assert!(fs::canonicalize(format!("{relative}/plugin")).is_ok());
        let path_var = OsString::from(format!("{relative}:/nonexistent-dir"));
        assert!(refused(policy.allowed_on("plugin", Some(&path_var))));
        // The same directory, absolute, is searched.
        let absolute = tree.path_var(&["sub"]);
        assert!(policy.allowed_on("plugin", Some(&absolute)).is_ok());
    }

    #[rstest]
    #[case::not_on_path("tether-no-such-plugin")]
    #[case::empty("")]
    #[case::dot_dot("..")]
    fn unknown_bare_names_are_refused(#[case] name: &str) {
        let tree = Tree::new();
        let policy = ExecPolicy::new([tree.file("plugin", 0o755)]);
        assert!(refused(policy.allowed(name)));
    }

    #[test]
    fn a_path_missing_when_the_policy_is_made_never_matches() {
        let tree = Tree::new();
        let later = tree.path("later");
        let policy = ExecPolicy::new([later.clone()]);
        assert_eq!(policy.unresolved(), std::slice::from_ref(&later));
        tree.file("later", 0o755);
        assert!(refused(policy.allowed(later.to_str().unwrap())));
    }

    #[test]
    fn the_default_policy_refuses_everything() {
        assert!(refused(ExecPolicy::default().allowed("/bin/sh")));
        assert!(refused(ExecPolicy::none().allowed("sh")));
        assert_eq!(ExecPolicy::none().timeout(), ExecPolicy::DEFAULT_TIMEOUT);
    }

    #[test]
    fn check_refuses_what_the_declaration_does_not_accept() {
        let tree = Tree::new();
        let plugin = tree.file("plugin", 0o755);
        let mut config = ExecConfig {
            command: plugin.display().to_string(),
            args: vec![],
            env: vec![ExecEnvVar {
                name: "AWS_PROFILE".to_owned(),
                value: "x".to_owned(),
            }],
            api_version: ExecApiVersion::V1,
            provide_cluster_info: false,
            cluster: None,
        };
        let rules = DefinitionRules {
            definition_args: vec![],
            definition_env: vec![EnvRule {
                name: "AWS_PROFILE".to_owned(),
                pattern: Pattern::new("[a-z]+").unwrap(),
            }],
        };
        let declared = PluginDeclaration::new(plugin.clone(), vec![], vec![], rules).unwrap();
        // `--allow-exec` alone accepts no variable; the declaration accepts this one.
        let bare = ExecPolicy::new([plugin.clone()]);
        assert!(matches!(
            bare.check(&config),
            Err(ExecError::EnvNotAllowed { .. })
        ));
        let policy = bare.also_declaring([declared]);
        assert_eq!(policy.check(&config).unwrap(), plugin);
        config.env[0].name = "LD_PRELOAD".to_owned();
        assert_eq!(
            policy.check(&config).unwrap_err(),
            ExecError::EnvNotAllowed {
                name: Text::new("LD_PRELOAD")
            }
        );
        config.env.clear();
        config.args.push("--profile".to_owned());
        assert!(matches!(
            policy.check(&config),
            Err(ExecError::ArgNotAllowed { index: 0, .. })
        ));
    }

    #[test]
    fn only_allows_one_declaration_with_the_same_limits() {
        let tree = Tree::new();
        let (first, second) = (tree.file("plugin", 0o755), tree.file("other/p", 0o755));
        let run_as = RunAs { uid: 7, gid: 8 };
        let policy = ExecPolicy::new([first.clone()])
            .with_timeout(Duration::from_secs(3))
            .with_run_as(Some(run_as));
        let only = policy.only(Arc::new(PluginDeclaration::command_only(second.clone())));
        assert_eq!(only.allowed_paths(), [second]);
        assert_eq!(
            (only.timeout(), only.run_as()),
            (Duration::from_secs(3), Some(run_as))
        );
        assert!(refused(only.allowed(first.to_str().unwrap())));
    }
}
