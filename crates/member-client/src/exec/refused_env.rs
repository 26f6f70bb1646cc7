//! Environment variables a plugin declaration may not let a member definition set.
//!
//! The plugin's environment is an allow-list (see [`run`](super::run)); this is only an extra
//! check on the names an operator lists in `definitionEnv`, so that a declaration cannot hand
//! a definition the choice of code, configuration files or trust by mistake.

/// Variables through which whoever sets them chooses code the plugin (or the shell, runtime or
/// loader it starts) runs, which configuration or credential files it reads, or whom it
/// trusts and talks through. No list of this kind is complete; it covers the dynamic loader,
/// program lookup, `HOME` and other configuration roots, shell start-up files, the usual
/// interpreters, cloud CLIs' config files, proxies and CA bundles.
pub(crate) fn env_is_refused(name: &str) -> bool {
    // Space-separated lists.
    const NAMES: &str = "\
        PATH IFS ENV BASH_ENV SHELLOPTS BASHOPTS PS4 PROMPT_COMMAND GCONV_PATH LOCPATH \
        HOSTALIASES NODE_OPTIONS NODE_PATH PERL5OPT PERL5LIB PERLLIB RUBYOPT RUBYLIB \
        JAVA_TOOL_OPTIONS _JAVA_OPTIONS JDK_JAVA_OPTIONS CLASSPATH GIT_EXEC_PATH \
        KUBERNETES_EXEC_INFO HOME ZDOTDIR TMPDIR KUBECONFIG SSL_CERT_FILE SSL_CERT_DIR \
        REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS OPENSSL_CONF OPENSSL_ENGINES \
        AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE AWS_WEB_IDENTITY_TOKEN_FILE \
        AWS_CA_BUNDLE GOOGLE_APPLICATION_CREDENTIALS AZURE_FEDERATED_TOKEN_FILE \
        AZURE_CONFIG_DIR";
    const PREFIXES: &str = "\
        LD_ DYLD_ BASH_FUNC_ PYTHON GCONV_ MALLOC_ CLOUDSDK_ XDG_ GIT_ AWS_ENDPOINT_URL";
    /// Honoured in either case by curl, Go, Python and most HTTP clients.
    const PROXIES: &[&str] = &["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"];
    // `=` or NUL in a name would forge a different variable than the one named.
    name.is_empty()
        || name.contains(['=', '\0'])
        || NAMES.split(' ').any(|refused| name == refused)
        || PREFIXES.split(' ').any(|prefix| name.starts_with(prefix))
        || PROXIES.iter().any(|proxy| name.eq_ignore_ascii_case(proxy))
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
    #[case::home("HOME", true)]
    #[case::aws_config("AWS_CONFIG_FILE", true)]
    #[case::gcloud_python("CLOUDSDK_PYTHON", true)]
    #[case::zsh("ZDOTDIR", true)]
    #[case::proxy("HTTPS_PROXY", true)]
    #[case::lowercase_proxy("https_proxy", true)]
    #[case::ca_file("SSL_CERT_FILE", true)]
    #[case::requests_ca("REQUESTS_CA_BUNDLE", true)]
    #[case::kubeconfig("KUBECONFIG", true)]
    #[case::plain("AWS_PROFILE", false)]
    #[case::region("AWS_REGION", false)]
    #[case::lowercase_is_not_the_loader("ld_preload", false)]
    fn env_names_that_choose_code_or_trust_are_refused(#[case] name: &str, #[case] want: bool) {
        assert_eq!(env_is_refused(name), want);
    }
}
