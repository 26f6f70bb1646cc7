use std::time::Duration;

use member_client::validation::EndpointPolicy;
use rstest::rstest;

use super::*;
use clap::CommandFactory as _;

/// `flags` parsed as the collector's command line.
pub(crate) fn parse(flags: &[&str]) -> Result<Args, clap::Error> {
    Args::try_parse_from(std::iter::once("collector").chain(flags.iter().copied()))
}

/// A collector reading its members from the directory `/m`, with `extra` flags.
pub(crate) fn directory(extra: &[&str]) -> Args {
    parse(
        &[
            &["--members-from", "directory", "--members-dir", "/m"],
            extra,
        ]
        .concat(),
    )
    .unwrap()
}

#[test]
fn flags_are_consistent() {
    Args::command().debug_assert();
}

#[test]
fn defaults() {
    let args = parse(&[]).unwrap();
    assert_eq!(args.sources.members_from, MembersFrom::Karmada);
    assert_eq!(args.mirror, vec!["apps/v1/deployments".parse().unwrap()]);
    assert!(args.write_status);
    assert!(
        !args.insecure_serve_api,
        "the API is authenticated by default"
    );
    assert_eq!(args.probe_period(), Duration::from_secs(10));
    assert_eq!(args.secret_namespace, ["karmada-cluster"]);
    assert_eq!(args.endpoint_policy(), EndpointPolicy::default());
    assert_eq!(args.probe_listen, "0.0.0.0:8081".parse().unwrap());
    assert!(args.tls_files.is_none() && !args.insecure_plain_http_listen);
    assert_eq!(args.publish_clusterprofiles, None);
    let exec = args.exec_policy().unwrap();
    assert!(!exec.allows_any());
    assert_eq!(exec.run_as(), None);
}

/// Command lines refused at start, saying `says`.
#[rstest]
#[case::a_certificate_without_its_key(&["--tls-cert-file", "c"], "")]
#[case::a_key_without_its_certificate(&["--tls-private-key-file", "k"], "")]
#[case::tls_files_with_plain_http(
    &["--insecure-plain-http-listen", "--tls-cert-file", "c", "--tls-private-key-file", "k"], "")]
#[case::no_access_reviews(&["--access-review-rate", "0"], "")]
#[case::an_endpoint_not_an_address(&["--allow-endpoint", "localhost"], "")]
// Strict without a range would refuse every member.
#[case::strict_without_a_range(&["--endpoint-policy", "strict"], "")]
#[case::a_directory_without_its_dir(&["--members-from", "directory"], "")]
#[case::a_kind_without_its_group_version(&["--mirror", "deployments"], "")]
#[case::exec_as_root(&["--exec-run-as", "0"], "")]
#[case::an_empty_namespace(&["--publish-clusterprofiles", ""], "")]
#[case::an_upper_case_namespace(&["--publish-clusterprofiles", "Fleet"], "")]
#[case::a_dotted_namespace(&["--publish-clusterprofiles", "a.b"], "")]
#[case::a_prefixed_namespace(&["--publish-clusterprofiles", "clusterprofile:fleet"], "")]
#[case::mirroring_secrets(
    &["--mirror", "apps/v1/deployments,v1/secrets"],
    "v1/secrets may not be mirrored: Secrets hold tokens and keys"
)]
fn refused(#[case] flags: &[&str], #[case] says: &str) {
    let err = parse(flags).unwrap_err().to_string();
    assert!(err.contains(says), "{err}");
}

#[test]
fn endpoint_flags_build_the_policy() {
    let args = parse(&[
        "--allow-endpoint",
        "127.0.0.1/32",
        "--allow-endpoint",
        "::1",
        "--allow-plain-http",
        "--allow-insecure-members",
        "--secret-namespace",
        "a,b",
    ])
    .unwrap();
    let want = EndpointPolicy::default()
        .allow("127.0.0.1/32".parse().unwrap())
        .allow("::1/128".parse().unwrap())
        .allow_plain_http(true)
        .allow_insecure_tls(true);
    assert_eq!(args.endpoint_policy(), want);
    assert_eq!(args.secret_namespace, ["a", "b"]);
}

#[test]
fn strict_endpoint_policy_makes_the_ranges_the_whole_allow_list() {
    let range = ["--allow-endpoint", "127.0.0.2/32"];
    let policy = parse(&[&["--endpoint-policy", "strict"][..], &range].concat())
        .unwrap()
        .endpoint_policy();
    let want = EndpointPolicy::default()
        .allow("127.0.0.2/32".parse().unwrap())
        .strict(true);
    assert_eq!(policy, want);
    // Judged, never dialled.
    let admits = |policy: &EndpointPolicy, url: &str| policy.check_uri(&url.parse().unwrap());
    assert_eq!(admits(&policy, "https://127.0.0.2:6443"), Ok(()));
    assert!(admits(&policy, "https://10.0.0.1:6443").is_err());
    let default = parse(&range).unwrap().endpoint_policy();
    assert_eq!(admits(&default, "https://10.0.0.1:6443"), Ok(()));
}

#[test]
fn chosen_flags_are_taken() {
    let args = parse(&[
        "--mirror",
        "apps/v1/deployments,v1/configmaps",
        "--write-status",
        "false",
        "--publish-clusterprofiles",
        "fleet",
        "--tls-cert-file",
        "c",
        "--tls-private-key-file",
        "k",
    ])
    .unwrap();
    assert_eq!(args.mirror.len(), 2);
    assert!(!args.write_status);
    assert_eq!(args.publish_clusterprofiles.as_deref(), Some("fleet"));
    let files = args.tls_files.unwrap();
    assert_eq!(
        (files.cert.to_str(), files.key.to_str()),
        (Some("c"), Some("k"))
    );
    assert!(parse(&["--insecure-plain-http-listen"]).is_ok());
}

#[test]
fn exec_flags_build_the_policy() {
    let dir = std::env::temp_dir().join(format!("exec-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("plugins.yaml");
    std::fs::write(
        &file,
        "providers:\n- name: sh\n  execConfig: {command: /bin/sh, args: [-c]}\n  \
         definitionArgs: [{pattern: 'exit 0'}]\n",
    )
    .unwrap();
    let file = file.display().to_string();
    let args = parse(&[
        "--exec-plugins",
        &file,
        "--allow-exec",
        "/bin/true",
        "--exec-run-as",
        "65534",
        "--exec-timeout",
        "7",
    ])
    .unwrap();
    let policy = args.exec_policy().unwrap();
    assert_eq!(policy.run_as(), Some("65534:65534".parse().unwrap()));
    assert_eq!(policy.timeout(), Duration::from_secs(7));
    assert_eq!(policy.allowed_paths().len(), 2, "{policy:?}");
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "providers: [{name: p, execConfig: {command: sh}}]").unwrap();
    let bad = bad.display().to_string();
    let args = parse(&["--exec-plugins", &bad]).unwrap();
    let err = format!("{:#}", args.exec_policy().unwrap_err());
    assert!(err.contains("absolute path"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_member_client_gets_the_request_timeout_and_the_response_limits() {
    let limits = parse(&[
        "--request-timeout",
        "3",
        "--member-response-limit-mib",
        "2",
        "--member-watch-line-limit-mib",
        "1",
    ])
    .unwrap()
    .member_client_limits();
    assert_eq!(limits.request_timeout, Duration::from_secs(3));
    assert_eq!(limits.response.response_bytes, 2 * 1024 * 1024);
    assert_eq!(limits.response.watch_line_bytes, 1024 * 1024);
    assert_eq!(
        limits.max_concurrent_requests,
        member_client::ClientLimits::default().max_concurrent_requests
    );
}
