//! Environment variables a member definition may not set for its plugin.

/// Variables through which whoever sets them chooses code the plugin (or the shell, runtime or
/// loader it starts) runs. No list of this kind is complete; it covers the dynamic loader,
/// program lookup, shell start-up files and the usual interpreters.
pub(crate) fn env_is_refused(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "PATH",
        "IFS",
        "ENV",
        "BASH_ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "GCONV_PATH",
        "LOCPATH",
        "HOSTALIASES",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
        "GIT_EXEC_PATH",
        "KUBERNETES_EXEC_INFO",
    ];
    const PREFIXES: &[&str] = &["LD_", "DYLD_", "BASH_FUNC_", "PYTHON", "GCONV_", "MALLOC_"];
    // `=` or NUL in a name would forge a different variable than the one named.
    name.is_empty()
        || name.contains(['=', '\0'])
        || NAMES.contains(&name)
        || PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::preload("LD_PRELOAD", true)]
    #[case::library_path("LD_LIBRARY_PATH", true)]
    #[case::macos_loader("DYLD_INSERT_LIBRARIES", true)]
    #[case::path("PATH", true)]
    #[case::bash_startup("BASH_ENV", true)]
    #[case::bash_function("BASH_FUNC_curl%%", true)]
    #[case::python("PYTHONPATH", true)]
    #[case::node("NODE_OPTIONS", true)]
    #[case::exec_info("KUBERNETES_EXEC_INFO", true)]
    #[case::equals_sign("A=B", true)]
    #[case::nul("A\0B", true)]
    #[case::empty("", true)]
    #[case::plain("AWS_PROFILE", false)]
    #[case::lowercase_is_not_the_loader("ld_preload", false)]
    fn env_names_that_choose_code_are_refused(#[case] name: &str, #[case] want: bool) {
        assert_eq!(env_is_refused(name), want);
    }
}
