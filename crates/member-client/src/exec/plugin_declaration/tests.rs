use super::*;
use rstest::rstest;

fn rules(args: &[&str], env: &[(&str, &str)]) -> DefinitionRules {
    DefinitionRules {
        definition_args: (args.iter())
            .map(|p| ArgRule {
                pattern: Pattern::new(p).unwrap(),
            })
            .collect(),
        definition_env: (env.iter())
            .map(|(name, p)| EnvRule {
                name: (*name).to_owned(),
                pattern: Pattern::new(p).unwrap(),
            })
            .collect(),
    }
}

fn config(args: &[&str], env: Vec<ExecEnvVar>) -> ExecConfig {
    ExecConfig {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env,
        ..ExecConfig::new("/usr/local/bin/aws")
    }
}

fn eks() -> PluginDeclaration {
    PluginDeclaration::new(
        "/usr/local/bin/aws",
        vec!["eks".into(), "get-token".into()],
        vec![ExecEnvVar::new("AWS_STS_REGIONAL_ENDPOINTS", "regional")],
        rules(
            &["--cluster-name", "prod-[a-z0-9-]{1,40}"],
            &[("AWS_REGION", "[a-z]{2}-[a-z]+-[0-9]")],
        ),
    )
    .unwrap()
}

fn run(declaration: &PluginDeclaration, config: &ExecConfig) -> Result<Invocation, ExecError> {
    declaration.invocation(PathBuf::from("/p"), config)
}

#[test]
fn accepted_args_follow_the_fixed_ones_and_definition_env_wins() {
    let config = config(
        &["--cluster-name", "prod-eu-1"],
        vec![ExecEnvVar::new("AWS_REGION", "eu-west-1")],
    );
    let invocation = run(&eks(), &config).unwrap();
    let want = ["eks", "get-token", "--cluster-name", "prod-eu-1"];
    assert_eq!(invocation.args, want);
    assert_eq!(
        invocation.env,
        [
            ExecEnvVar::new("AWS_STS_REGIONAL_ENDPOINTS", "regional"),
            ExecEnvVar::new("AWS_REGION", "eu-west-1")
        ]
    );
}

#[test]
fn a_definition_that_repeats_the_fixed_args_has_them_dropped() {
    let config = config(&["eks", "get-token", "--cluster-name", "prod-a"], vec![]);
    let want = ["eks", "get-token", "--cluster-name", "prod-a"];
    assert_eq!(run(&eks(), &config).unwrap().args, want);
}

#[rstest]
#[case::a_file_outside(&["/var/run/secrets/kubernetes.io/serviceaccount/token"], 0)]
#[case::value_not_matching(&["--cluster-name", "staging"], 1)]
#[case::pattern_is_anchored(&["--cluster-name", "prod-a --profile admin"], 1)]
#[case::one_too_many(&["--cluster-name", "prod-a", "--profile"], 2)]
fn a_refused_arg_is_named_by_its_position(#[case] args: &[&str], #[case] want: usize) {
    let err = run(&eks(), &config(args, vec![])).unwrap_err();
    let named = matches!(err, ExecError::ArgNotAllowed { index, accepted: 2, .. } if index == want);
    assert!(named, "{err:?}");
    let text = err.to_string();
    assert!(!text.contains(args[want]), "{text}");
    assert!(text.contains(&format!("argument {want}")), "{text}");
}

#[rstest]
#[case::undeclared("HOME", "/tmp/attacker")]
#[case::undeclared_loader("LD_PRELOAD", "/tmp/evil.so")]
#[case::value_not_matching("AWS_REGION", "eu-west-1; rm")]
fn a_refused_variable_is_named_without_its_value(#[case] name: &str, #[case] value: &str) {
    let err = run(&eks(), &config(&[], vec![ExecEnvVar::new(name, value)])).unwrap_err();
    let want = ExecError::EnvNotAllowed {
        name: Text::new(name),
    };
    assert_eq!(err, want);
    assert!(!err.to_string().contains(value), "{err}");
    assert_eq!(err.condition_reason(), "ExecNotAllowed");
}

#[test]
fn the_allow_exec_shorthand_accepts_no_arg_and_no_variable() {
    let shorthand = PluginDeclaration::command_only("/usr/local/bin/aws");
    assert!(run(&shorthand, &config(&[], vec![])).is_ok());
    let arg = run(&shorthand, &config(&["token"], vec![]));
    assert!(matches!(
        arg,
        Err(ExecError::ArgNotAllowed {
            index: 0,
            accepted: 0,
            ..
        })
    ));
    let env = vec![ExecEnvVar::new("AWS_PROFILE", "x")];
    let var = run(&shorthand, &config(&[], env));
    assert!(matches!(var, Err(ExecError::EnvNotAllowed { .. })));
}

#[rstest]
#[case::relative("aws", &[], DeclarationError::RelativeCommand("aws".into()))]
#[case::home("/bin/p", &["HOME"], DeclarationError::RefusedEnvName("HOME".into()))]
#[case::loader("/bin/p", &["LD_PRELOAD"], DeclarationError::RefusedEnvName("LD_PRELOAD".into()))]
#[case::config_file("/bin/p", &["AWS_CONFIG_FILE"], DeclarationError::RefusedEnvName("AWS_CONFIG_FILE".into()))]
#[case::proxy("/bin/p", &["https_proxy"], DeclarationError::RefusedEnvName("https_proxy".into()))]
#[case::twice("/bin/p", &["A", "A"], DeclarationError::DuplicateEnvName("A".into()))]
#[case::forged("/bin/p", &["A=B"], DeclarationError::BadEnvName("A=B".into()))]
fn unusable_declarations_are_refused(
    #[case] command: &str,
    #[case] names: &[&str],
    #[case] want: DeclarationError,
) {
    let env: Vec<(&str, &str)> = names.iter().map(|n| (*n, ".*")).collect();
    let got = PluginDeclaration::new(command, vec![], vec![], rules(&[], &env));
    assert_eq!(got.unwrap_err(), want);
}

#[test]
fn patterns_are_anchored_and_bad_ones_refused() {
    let pattern = Pattern::new("a|b").unwrap();
    assert!(pattern.is_match("a") && pattern.is_match("b"));
    assert!(!pattern.is_match("ab") && !pattern.is_match("xa"));
    assert!(Pattern::new("(").is_err());
    assert!(Pattern::new(&"a".repeat(2000)).is_err());
    assert!(Pattern::new("a{1000}{1000}").is_err());
}

#[test]
fn debug_shows_the_arg_count_and_env_names_only() {
    let declaration = PluginDeclaration::new(
        "/bin/p",
        vec!["--secret=arg-s3cr3t".into()],
        vec![ExecEnvVar::new("API_KEY", "env-s3cr3t")],
        DefinitionRules::default(),
    )
    .unwrap();
    let invocation = run(&declaration, &config(&[], vec![])).unwrap();
    let printed = format!("{declaration:?} {declaration:#?} {invocation:?}");
    assert!(!printed.contains("s3cr3t"), "{printed}");
    assert!(printed.contains("API_KEY"), "{printed}");
}
