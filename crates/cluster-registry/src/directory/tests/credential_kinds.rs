//! Each credential kind a member file may name, and the combinations it may not.

use member_client::{
    client_identity::ClientIdentity,
    exec::{ExecApiVersion, ExecCluster, ExecEnvVar},
};

use super::*;
use crate::test_ca::client_pem;

const ENDPOINT: &str = "name: m1\napiEndpoint: https://h:6443\n";
const CERTIFICATE: &str = "clientCertFile: c.crt\nclientKeyFile: c.key\n";

/// A directory holding `c.crt`, a client certificate of `m1-client`, and `c.key`: its key, or
/// `key`.
fn certified(key: Option<&str>) -> Dir {
    let (cert, own_key) = client_pem("m1-client");
    let dir = Dir::new();
    dir.write("c.crt", cert)
        .write("c.key", key.unwrap_or(&own_key));
    dir
}

#[test]
fn a_client_certificate_and_key_are_the_credential() {
    let member = certified(None).member(&format!("{ENDPOINT}{CERTIFICATE}"));
    assert!(member.definition.spec.is_ok(), "{:?}", member.definition);
    assert_eq!(member.stored().unwrap().certificate_subject(), "m1-client");
}

#[test]
fn a_token_file_may_accompany_a_certificate_and_both_are_sent() {
    let dir = certified(None);
    let member = dir
        .write("t", "tok\n")
        .member(&format!("{ENDPOINT}tokenFile: t\n{CERTIFICATE}"));
    let cred = member.stored().unwrap().static_credential();
    assert_eq!(cred.token().unwrap().expose_secret(), "tok");
    assert_eq!(cred.identity().unwrap().subject(), "m1-client");
}

#[test]
fn an_exec_stanza_is_an_exec_plan_told_the_members_endpoint_ca_and_proxy() {
    let ca = ca_pem();
    let dir = Dir::new();
    dir.write("ca.crt", &ca);
    let yaml = format!(
        "{ENDPOINT}caFile: ca.crt\nproxyURL: http://p:3128\nexec:\n  \
         apiVersion: client.authentication.k8s.io/v1beta1\n  command: /opt/auth\n  \
         args: [token, --region, eu-1]\n  env: [{{name: CLOUD_KEY, value: env-s3cr3t}}]\n  \
         provideClusterInfo: true\n"
    );
    let member = dir.member(&yaml);
    assert!(member.definition.spec.is_ok(), "{:?}", member.definition);
    let plan = member.stored().unwrap().exec_plan();
    let config = &plan.config;
    assert_eq!(config.command, "/opt/auth");
    assert_eq!(config.args, ["token", "--region", "eu-1"]);
    assert_eq!(config.env, [ExecEnvVar::new("CLOUD_KEY", "env-s3cr3t")]);
    assert_eq!(config.api_version, ExecApiVersion::V1Beta1);
    assert!(config.provide_cluster_info);
    assert_eq!(
        config.cluster,
        Some(ExecCluster {
            certificate_authority_data: Some(ca.clone().into_bytes()),
            proxy_url: Some("http://p:3128".into()),
            ..ExecCluster::new("https://h:6443")
        })
    );
    assert_eq!(plan.ca_bundle.as_deref(), Some(ca.as_bytes()));
    let printed = format!("{member:?} {:?}", serde_yaml::from_str::<MemberFile>(&yaml));
    assert!(!printed.contains("env-s3cr3t"), "{printed}");
}

#[rstest]
// no credential, or two
#[case::no_credential(ENDPOINT, "no credential")]
#[case::exec_and_token(
    "name: m1\napiEndpoint: https://h\ntokenFile: t\nexec: {apiVersion: client.authentication.k8s.io/v1, command: /a}\n",
    "choose one credential"
)]
#[case::exec_and_certificate(
    "name: m1\napiEndpoint: https://h\nclientCertFile: c\nexec: {apiVersion: client.authentication.k8s.io/v1, command: /a}\n",
    "choose one credential"
)]
#[case::no_endpoint("name: m1\ntokenFile: t\n", "apiEndpoint is required")]
// kubeconfig says it all
#[case::kubeconfig_and_endpoint("name: m1\nkubeconfig: k\napiEndpoint: https://h\n", "apiEndpoint")]
#[case::kubeconfig_and_token("name: m1\nkubeconfig: k\ntokenFile: t\n", "tokenFile")]
#[case::kubeconfig_and_ca("name: m1\nkubeconfig: k\ncaFile: ca\n", "caFile")]
#[case::kubeconfig_and_certificate(
    "name: m1\nkubeconfig: k\nclientCertFile: c\nclientKeyFile: k\n",
    "clientCertFile, clientKeyFile"
)]
#[case::kubeconfig_and_exec(
    "name: m1\nkubeconfig: k\nexec: {apiVersion: client.authentication.k8s.io/v1, command: /a}\n",
    "exec must not"
)]
#[case::kubeconfig_and_proxy("name: m1\nkubeconfig: k\nproxyURL: http://p\n", "proxyURL")]
#[case::kubeconfig_and_insecure(
    "name: m1\nkubeconfig: k\ninsecureSkipTLSVerification: true\n",
    "insecureSkipTLSVerification"
)]
// the exec stanza's own shape
#[case::exec_typo(
    "name: m1\napiEndpoint: https://h\nexec: {apiVersion: client.authentication.k8s.io/v1, command: /a, arg: [x]}\n",
    "unknown field `arg`"
)]
#[case::exec_without_command(
    "name: m1\napiEndpoint: https://h\nexec: {apiVersion: client.authentication.k8s.io/v1}\n",
    "missing field `command`"
)]
#[case::exec_env_typo(
    "name: m1\napiEndpoint: https://h\nexec: {apiVersion: client.authentication.k8s.io/v1, command: /a, env: [{name: K, valeu: v}]}\n",
    "unknown field `valeu`"
)]
fn credential_kinds_are_exclusive(#[case] yaml: &str, #[case] want: &str) {
    let member = Dir::new().member(yaml);
    let reason = member.refused();
    assert_eq!(reason.condition_reason(), "DefinitionInvalid", "{reason}");
    assert!(reason.to_string().contains(want), "{reason}");
    assert!(
        member.secret.is_none(),
        "nothing is read for a refused file"
    );
}

#[test]
fn an_exec_env_value_of_the_wrong_shape_is_not_quoted() {
    let member = Dir::new().member(
        "name: m1\napiEndpoint: https://h\nexec:\n  apiVersion: client.authentication.k8s.io/v1\n  \
         command: /a\n  env: [\"SECRET=env-s3cr3t\"]\n",
    );
    let reason = member.refused().to_string();
    assert!(reason.starts_with("DefinitionInvalid"), "{reason}");
    assert!(reason.contains("line 6"), "{reason}");
    assert!(!reason.contains("s3cr3t"), "{reason}");
}

#[rstest]
#[case::certificate_alone("clientCertFile: c.crt\n", "client key")]
#[case::key_alone("clientKeyFile: c.key\n", "client certificate")]
fn half_a_certificate_is_secret_invalid(#[case] keys: &str, #[case] missing: &str) {
    let member = certified(None).member(&format!("{ENDPOINT}{keys}"));
    assert!(member.definition.spec.is_ok(), "the definition is fine");
    let err = member.stored().unwrap_err();
    assert!(
        matches!(err, SourceError::MissingKey { field, .. } if field == missing),
        "{err:?}"
    );
    assert_eq!(InvalidReason::from(err).condition_reason(), "SecretInvalid");
}

#[rstest]
#[case::certificate("c.crt")]
#[case::key("c.key")]
fn a_missing_certificate_or_key_file_is_secret_not_found(#[case] missing: &str) {
    let dir = certified(None);
    std::fs::remove_file(dir.path(missing)).unwrap();
    let member = dir.member(&format!("{ENDPOINT}{CERTIFICATE}"));
    assert!(member.secret.is_none(), "{member:?}");
}

#[test]
fn a_key_that_does_not_match_the_certificate_is_certificate_invalid_and_not_quoted() {
    let (_, other_key) = client_pem("someone-else");
    let member = certified(Some(&other_key)).member(&format!("{ENDPOINT}{CERTIFICATE}"));
    let err = member.stored().unwrap_err();
    let reason = InvalidReason::from(err);
    assert_eq!(reason.condition_reason(), "CertificateInvalid", "{reason}");
    let body = other_key.lines().nth(1).unwrap();
    assert!(!format!("{err} {err:?} {reason}").contains(body));
}

#[test]
fn certificate_and_key_files_are_capped_and_stay_inside_the_directory() {
    let dir = certified(None);
    dir.write("big.key", vec![b'k'; ClientIdentity::MAX_KEY_BYTES + 1]);
    std::os::unix::fs::symlink("/etc/hostname", dir.path("out.crt")).unwrap();
    for (keys, want) in [
        (
            "clientCertFile: c.crt\nclientKeyFile: big.key\n",
            "larger than 65536",
        ),
        (
            "clientCertFile: out.crt\nclientKeyFile: big.key\n",
            "leads out",
        ),
        ("clientCertFile: ../c.crt\nclientKeyFile: big.key\n", "'..'"),
    ] {
        let member = dir.member(&format!("{ENDPOINT}{keys}"));
        let err = member.stored().unwrap_err().to_string();
        assert!(err.contains(want), "{keys}: {err}");
    }
}

#[test]
fn an_exec_api_version_other_than_v1_or_v1beta1_is_secret_invalid() {
    let member = Dir::new().member(&format!(
        "{ENDPOINT}exec: {{apiVersion: client.authentication.k8s.io/v1alpha1, command: /a}}\n"
    ));
    let err = member.stored().unwrap_err();
    assert!(matches!(err, SourceError::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains("apiVersion"), "{err}");
}
