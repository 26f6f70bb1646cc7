use std::time::Duration;

use member_client::EndpointPolicy;

use super::*;
use clap::CommandFactory as _;

#[test]
fn flags_are_consistent() {
    Args::command().debug_assert();
}

#[test]
fn defaults() {
    let args = Args::try_parse_from(["collector"]).unwrap();
    assert_eq!(args.members_from, MembersFrom::Karmada);
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
    assert!(args.tls_cert_file.is_none() && !args.insecure_plain_http_listen);
}

#[test]
fn tls_files_go_together_and_exclude_plain_http() {
    let both = ["--tls-cert-file", "c", "--tls-private-key-file", "k"];
    assert!(Args::try_parse_from(["collector"].iter().chain(&both)).is_ok());
    assert!(Args::try_parse_from(["collector", "--tls-cert-file", "c"]).is_err());
    assert!(Args::try_parse_from(["collector", "--tls-private-key-file", "k"]).is_err());
    let plain = ["collector", "--insecure-plain-http-listen"];
    assert!(Args::try_parse_from(plain.iter().chain(&both)).is_err());
    assert!(Args::try_parse_from(plain).is_ok());
    assert!(Args::try_parse_from(["collector", "--access-review-rate", "0"]).is_err());
}

#[test]
fn endpoint_flags_build_the_policy() {
    let args = Args::try_parse_from([
        "collector",
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
    assert!(Args::try_parse_from(["collector", "--allow-endpoint", "localhost"]).is_err());
}

#[test]
fn strict_endpoint_policy_makes_the_ranges_the_whole_allow_list() {
    let args = Args::try_parse_from([
        "collector",
        "--endpoint-policy",
        "strict",
        "--allow-endpoint",
        "127.0.0.2/32",
    ])
    .unwrap();
    let policy = args.endpoint_policy();
    let want = EndpointPolicy::default()
        .allow("127.0.0.2/32".parse().unwrap())
        .strict(true);
    assert_eq!(policy, want);
    // Judged, never dialled.
    let admits = |policy: &EndpointPolicy, url: &str| policy.check_uri(&url.parse().unwrap());
    assert_eq!(admits(&policy, "https://127.0.0.2:6443"), Ok(()));
    assert!(admits(&policy, "https://10.0.0.1:6443").is_err());
    let default = Args::try_parse_from(["collector", "--allow-endpoint", "127.0.0.2/32"])
        .unwrap()
        .endpoint_policy();
    assert_eq!(admits(&default, "https://10.0.0.1:6443"), Ok(()));
    assert!(
        Args::try_parse_from(["collector", "--endpoint-policy", "strict"]).is_err(),
        "strict without a range would refuse every member"
    );
}

#[test]
fn directory_needs_a_dir_and_bad_kinds_are_refused() {
    assert!(Args::try_parse_from(["collector", "--members-from", "directory"]).is_err());
    assert!(Args::try_parse_from(["collector", "--mirror", "deployments"]).is_err());
    let args = Args::try_parse_from([
        "collector",
        "--mirror",
        "apps/v1/deployments,v1/configmaps",
        "--write-status",
        "false",
    ])
    .unwrap();
    assert_eq!(args.mirror.len(), 2);
    assert!(!args.write_status);
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
    let args = Args::try_parse_from([
        "collector",
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
    assert!(Args::try_parse_from(["collector", "--exec-run-as", "0"]).is_err());
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "providers: [{name: p, execConfig: {command: sh}}]").unwrap();
    let bad = bad.display().to_string();
    let args = Args::try_parse_from(["collector", "--exec-plugins", &bad]).unwrap();
    let err = format!("{:#}", args.exec_policy().unwrap_err());
    assert!(err.contains("absolute path"), "{err}");
    let defaults = Args::try_parse_from(["collector"])
        .unwrap()
        .exec_policy()
        .unwrap();
    assert!(!defaults.allows_any());
    assert_eq!(defaults.run_as(), None);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn publishing_names_a_namespace() {
    let args = Args::try_parse_from(["collector", "--publish-clusterprofiles", "fleet"]).unwrap();
    assert_eq!(args.publish_clusterprofiles.as_deref(), Some("fleet"));
    assert_eq!(
        Args::try_parse_from(["collector"])
            .unwrap()
            .publish_clusterprofiles,
        None
    );
    for bad in ["", "Fleet", "a.b", "clusterprofile:fleet"] {
        assert!(
            Args::try_parse_from(["collector", "--publish-clusterprofiles", bad]).is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn mirroring_secrets_is_refused_at_start_saying_why() {
    let err = Args::try_parse_from(["collector", "--mirror", "apps/v1/deployments,v1/secrets"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("v1/secrets may not be mirrored: Secrets hold tokens and keys"),
        "{err}"
    );
}
