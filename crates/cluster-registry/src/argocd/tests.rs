//! Argo CD cluster Secrets: definitions, each credential kind, and what is refused.

use super::*;
use crate::test_ca::{b64, ca_pem, client_pem};
use member_client::exec::{ExecApiVersion, ExecEnvVar};
use rstest::rstest;
use secrecy::ExposeSecret as _;
use serde_json::json;

fn secret(string_data: serde_json::Value) -> Secret {
    serde_json::from_value(json!({
        "metadata": {
            "name": "cluster-m1",
            "namespace": "argocd",
            "labels": { "argocd.argoproj.io/secret-type": "cluster" },
        },
        "stringData": string_data,
    }))
    .unwrap()
}

fn config(token: &str, ca: Option<&str>, insecure: bool) -> String {
    let mut tls = json!({ "insecure": insecure });
    if let Some(ca) = ca {
        tls["caData"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
    }
    json!({ "bearerToken": token, "tlsClientConfig": tls }).to_string()
}

fn key() -> CredentialKey {
    CredentialKey::new("argocd", "cluster-m1")
}

#[rstest]
#[case::plain(json!({"name": "m1", "server": "https://10.0.0.1:6443", "config": config("t", None, false)}), "m1", false)]
#[case::insecure(json!({"name": "m1", "server": "https://10.0.0.1", "config": config("t", None, true)}), "m1", true)]
#[case::name_defaults_to_the_secret(json!({"server": "https://10.0.0.1", "config": "{}"}), "cluster-m1", false)]
#[case::empty_name_defaults_too(json!({"name": " ", "server": "https://10.0.0.1", "config": "{}"}), "cluster-m1", false)]
fn definitions_parse(
    #[case] data: serde_json::Value,
    #[case] want_name: &str,
    #[case] want_insecure: bool,
) {
    let def = member_from_secret(&secret(data));
    assert_eq!(def.name, want_name);
    let spec = def.spec.unwrap();
    assert_eq!(spec.name, want_name);
    assert_eq!(spec.secret_ref, key());
    assert_eq!(spec.endpoint.insecure_skip_tls_verify, want_insecure);
    assert_eq!(spec.endpoint.proxy_url, None);
}

#[rstest]
// the endpoint
#[case::no_server(json!({"name": "m1", "config": "{}"}), "EndpointInvalid")]
#[case::ftp_server(json!({"name": "m1", "server": "ftp://10.0.0.1", "config": "{}"}), "EndpointInvalid")]
#[case::server_not_a_url(json!({"name": "m1", "server": "not a url", "config": "{}"}), "EndpointInvalid")]
// the config document
#[case::no_config(json!({"name": "m1", "server": "https://h"}), "SecretInvalid")]
#[case::garbage_config(json!({"name": "m1", "server": "https://h", "config": "{not json"}), "SecretInvalid")]
#[case::config_of_wrong_shape(json!({"name": "m1", "server": "https://h", "config": "[1,2]"}), "SecretInvalid")]
fn bad_definitions_are_invalid(#[case] data: serde_json::Value, #[case] want: &str) {
    let def = member_from_secret(&secret(data));
    assert_eq!(def.name, "m1", "an invalid member keeps its name");
    assert_eq!(def.spec.unwrap_err().condition_reason(), want);
}

#[test]
fn credential_has_the_token_and_decoded_ca() {
    let ca = ca_pem();
    let data = secret_data(&secret(
        json!({"config": config(" tok\n", Some(&ca), false)}),
    ));
    let stored = credential(&key(), &data).unwrap();
    let cred = stored.static_credential();
    assert_eq!(cred.token().unwrap().expose_secret(), "tok");
    assert_eq!(cred.ca_bundle().unwrap().as_ref(), ca.as_bytes());
}

#[rstest]
#[case::no_config(json!({}), "no \"config\" field")]
#[case::garbage(json!({"config": "{{{"}), "not a valid cluster config")]
#[case::no_bearer_token(json!({"config": r#"{"tlsClientConfig":{}}"#}), "config.bearerToken")]
#[case::empty_token(json!({"config": config("  ", None, false)}), "empty")]
#[case::ca_not_base64(json!({"config": r#"{"bearerToken":"t","tlsClientConfig":{"caData":"%%%"}}"#}), "not base64")]
#[case::ca_not_pem(json!({"config": config("t", Some("garbage"), false)}), "no CERTIFICATE block")]
#[case::exec_without_command(json!({"config": r#"{"execProviderConfig":{"apiVersion":"client.authentication.k8s.io/v1"}}"#}), "config.execProviderConfig has no command")]
fn bad_credentials_are_errors(#[case] data: serde_json::Value, #[case] want: &str) {
    let data = secret_data(&secret(data));
    let err = credential(&key(), &data).unwrap_err();
    assert!(err.to_string().contains(want), "{err}");
}

#[test]
fn a_config_error_never_quotes_the_token() {
    // A config that is a bare JSON string: serde_json would say `invalid type: string "…"`.
    let data = secret_data(&secret(json!({"config": "\"s3cr3t-token\""})));
    let err = credential(&key(), &data).unwrap_err();
    assert!(!err.to_string().contains("s3cr3t"), "{err}");
    assert!(!format!("{err:?}").contains("s3cr3t"), "{err:?}");
    let def = member_from_secret(&secret(
        json!({"server": "https://h", "config": "\"s3cr3t-token\""}),
    ));
    assert!(!def.spec.unwrap_err().to_string().contains("s3cr3t"));
}

fn credential_of(config: serde_json::Value) -> Result<StoredCredential, SourceError> {
    let data = secret_data(&secret(
        json!({"server": "https://10.0.0.1:6443", "config": config.to_string()}),
    ));
    credential(&key(), &data)
}

#[test]
fn cert_data_and_key_data_are_a_client_identity() {
    let (cert, client_key) = client_pem("argocd-manager");
    let stored = credential_of(json!({"tlsClientConfig": {
        "certData": b64(&cert), "keyData": b64(&client_key),
    }}))
    .unwrap();
    assert_eq!(stored.certificate_subject(), "argocd-manager");
}

#[test]
fn server_name_reaches_the_spec() {
    let def = member_from_secret(&secret(json!({
        "name": "m1",
        "server": "https://10.0.0.1:6443",
        "config": json!({"bearerToken": "t", "tlsClientConfig": {"serverName": "api.internal"}}).to_string(),
    })));
    assert_eq!(
        def.spec.unwrap().endpoint.tls_server_name.as_deref(),
        Some("api.internal")
    );
}

#[test]
fn exec_provider_config_is_an_exec_plan_told_the_server_ca_and_server_name() {
    let ca = ca_pem();
    let stored = credential_of(json!({
        "tlsClientConfig": {"caData": b64(&ca), "serverName": "api.internal"},
        "execProviderConfig": {
            "command": "argocd-k8s-auth", "args": ["aws", "--cluster-name", "m1"],
            "env": {"AWS_REGION": "eu-west-1"},
            "apiVersion": "client.authentication.k8s.io/v1beta1",
        },
    }))
    .unwrap();
    let plan = stored.exec_plan();
    let config = &plan.config;
    assert_eq!(config.command, "argocd-k8s-auth");
    assert_eq!(config.args, ["aws", "--cluster-name", "m1"]);
    assert_eq!(config.env, [ExecEnvVar::new("AWS_REGION", "eu-west-1")]);
    assert_eq!(config.api_version, ExecApiVersion::V1Beta1);
    let cluster = config.cluster.as_ref().unwrap();
    assert_eq!(cluster.server, "https://10.0.0.1:6443");
    assert_eq!(
        cluster.certificate_authority_data.as_deref(),
        Some(ca.as_bytes())
    );
    assert_eq!(cluster.tls_server_name.as_deref(), Some("api.internal"));
    assert_eq!(plan.ca_bundle.as_deref(), Some(ca.as_bytes()));
}

#[rstest]
#[case::aws_auth_only(json!({"awsAuthConfig": {"clusterName": "m1"}}))]
#[case::tls_settings_only(json!({"tlsClientConfig": {"insecure": true}}))]
fn a_config_with_no_token_certificate_or_exec_is_missing_key(#[case] config: serde_json::Value) {
    let err = credential_of(config).unwrap_err();
    assert!(matches!(err, SourceError::MissingKey { .. }), "{err:?}");
}

#[test]
fn key_data_that_is_not_base64_is_invalid_and_not_quoted() {
    let (cert, _) = client_pem("m");
    let err = credential_of(json!({"tlsClientConfig": {
        "certData": b64(&cert), "keyData": "not base64: s3cr3t-key!",
    }}))
    .unwrap_err();
    assert!(matches!(err, SourceError::Invalid { .. }), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(text.contains("keyData is not base64"), "{text}");
    assert!(!text.contains("s3cr3t"), "{text}");
}
