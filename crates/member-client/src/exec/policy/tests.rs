use super::*;
use crate::exec::{DefinitionRules, EnvRule, ExecEnvVar, Pattern};
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
fn an_allowed_path_resolves_to_itself_however_it_is_spelled() {
    let tree = Tree::new();
    let plugin = tree.file("plugin", 0o755);
    let policy = ExecPolicy::new([plugin.clone()]);
    assert_eq!(policy.allowed(plugin.to_str().unwrap()).unwrap(), plugin);
    let spelled = format!("{}/sub/../plugin", tree.path("").display());
    assert_eq!(policy.allowed(&spelled).unwrap(), plugin);
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
    let why = "the relative path must reach the plugin for this test to mean anything";
    assert_eq!(fs::canonicalize(&relative).unwrap(), plugin, "{why}");
    assert!(refused(policy.allowed(&relative)));
    assert!(refused(policy.allowed("./plugin")));
}

#[rstest]
#[case::skips_a_file_that_is_not_executable(0o644, true)]
#[case::refuses_one_shadowed_by_an_earlier_executable(0o755, false)]
fn a_bare_name_takes_the_first_executable_file_on_path(#[case] first: u32, #[case] ok: bool) {
    let tree = Tree::new();
    tree.file("sub/plugin", first);
    let plugin = tree.file("other/plugin", 0o755);
    let policy = ExecPolicy::new([plugin.clone()]);
    let path_var = tree.path_var(&["sub", "other"]);
    let allowed = policy.allowed_on("plugin", Some(&path_var));
    if ok {
        assert_eq!(allowed.unwrap(), plugin);
    } else {
        assert!(refused(allowed));
    }
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
        env: vec![ExecEnvVar::new("AWS_PROFILE", "x")],
        ..ExecConfig::new(plugin.display().to_string())
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
    let want = ExecError::EnvNotAllowed {
        name: Text::new("LD_PRELOAD"),
    };
    assert_eq!(policy.check(&config).unwrap_err(), want);
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
    assert_eq!(only.timeout(), Duration::from_secs(3));
    assert_eq!(only.run_as(), Some(run_as));
    assert!(refused(only.allowed(first.to_str().unwrap())));
}
