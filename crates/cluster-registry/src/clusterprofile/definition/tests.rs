use base64::Engine as _;
use member_client::{
    exec::ExecError,
    exec::{ExecConfig, ExecPolicy},
};
use rstest::rstest;
use serde_json::{Value, json};

use super::*;
use crate::test_ca::ca_pem;

const SERVER: &str = "https://cluster1.example:6443";

fn providers(providers: Value) -> ClusterProfileConfig {
    let file = ProviderFile::parse(json!({ "providers": providers }).to_string().as_bytes());
    ClusterProfileConfig {
        namespaces: vec!["inventory".into()],
        providers: Arc::new(file.unwrap()),
    }
}

fn secretreader(cli: &str, env: &str) -> Value {
    json!({"name": "secretreader",
           "execConfig": {"apiVersion": "client.authentication.k8s.io/v1",
                          "command": "/bin/secretreader-plugin", "args": ["--fixed"],
                          "env": [{"name": "PLUGIN_MODE", "value": "provider"}],
                          "provideClusterInfo": true},
           "profileSourcedCLIArgsPolicy": cli,
           "profileSourcedEnvVarsPolicy": env})
}

fn profile(status: Value) -> ClusterProfile {
    serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": "cluster1", "namespace": "inventory"},
        "spec": {"clusterManager": {"name": "open-cluster-management"}},
        "status": status,
    }))
    .unwrap()
}

fn offering(name: &str, cluster: Value) -> Value {
    json!({"accessProviders": [{"name": name, "cluster": cluster}]})
}

fn cluster(extra: Value) -> Value {
    let mut cluster = json!({
        "server": SERVER,
        "extensions": [{"name": EXEC_EXTENSION, "extension": {"clusterName": "cluster1"}}],
    });
    for (k, v) in extra.as_object().unwrap() {
        cluster[k] = v.clone();
    }
    cluster
}

/// The member of a profile offering `secretreader` with `cluster(extra)`.
fn offered(config: &ClusterProfileConfig, extra: Value) -> ProfileMember {
    config.member_from_profile(&profile(offering("secretreader", cluster(extra))))
}

fn plan(member: &ProfileMember) -> &ExecConfig {
    match member.secret.as_ref().unwrap().stored().unwrap() {
        StoredCredential::Exec(plan) => &plan.config,
        other => panic!("not a plugin plan: {other:?}"),
    }
}

fn reason(member: &ProfileMember) -> (&'static str, String) {
    let err = member.definition.spec.as_ref().unwrap_err();
    (err.condition_reason(), err.to_string())
}

#[test]
fn an_ocm_profile_becomes_a_member_run_by_the_providers_plugin() {
    let ca = ca_pem();
    let ca_data = base64::engine::general_purpose::STANDARD.encode(&ca);
    let config = providers(json!([secretreader("Ignore", "Ignore")]));
    let member = offered(
        &config,
        json!({"certificate-authority-data": ca_data, "tls-server-name": "api.c1"}),
    );
    let spec = member.definition.spec.as_ref().unwrap();
    assert_eq!(member.definition.name, "cluster1");
    assert_eq!(spec.endpoint.url, SERVER);
    assert_eq!(spec.endpoint.tls_server_name.as_deref(), Some("api.c1"));
    assert_eq!(
        spec.secret_ref,
        CredentialKey::new("clusterprofile:inventory", "cluster1")
    );
    let exec = plan(&member);
    assert_eq!(exec.command, "/bin/secretreader-plugin");
    // The provider's own args run from its declaration; the plan holds the profile's only.
    assert!(exec.args.is_empty(), "{:?}", exec.args);
    assert!(exec.env.is_empty());
    assert!(exec.provide_cluster_info);
    let handed = exec.cluster.as_ref().unwrap();
    assert_eq!(handed.server, SERVER);
    assert_eq!(handed.config, Some(json!({"clusterName": "cluster1"})));
    assert_eq!(
        handed.certificate_authority_data.as_deref(),
        Some(ca.as_bytes())
    );
    let stored = member.secret.as_ref().unwrap().stored().unwrap();
    assert_eq!(
        stored.ca_bundle().map(|b| b.to_vec()),
        Some(ca.into_bytes())
    );
}

fn two_providers() -> Value {
    json!([
        {"name": "b", "execConfig": {"command": "/bin/b", "apiVersion": "client.authentication.k8s.io/v1"}},
        {"name": "a", "execConfig": {"command": "/bin/a", "apiVersion": "client.authentication.k8s.io/v1"}},
    ])
}

#[rstest]
#[case::the_first_offered_provider_the_file_serves(
    two_providers(),
    json!({"accessProviders": [
        {"name": "unknown", "cluster": cluster(json!({}))},
        {"name": "a", "cluster": cluster(json!({}))},
        {"name": "b", "cluster": cluster(json!({}))},
    ]}),
    "/bin/a"
)]
#[case::deprecated_credential_providers_when_access_providers_are_absent(
    json!([secretreader("Ignore", "Ignore")]),
    json!({"credentialProviders": [{"name": "secretreader", "cluster": cluster(json!({}))}]}),
    "/bin/secretreader-plugin"
)]
#[case::a_profile_that_keeps_the_pins(
    json!([pinned_secretreader()]),
    offering("secretreader", cluster(json!({}))),
    "/bin/secretreader-plugin"
)]
fn the_plan_runs_the_provider_served(
    #[case] file: Value,
    #[case] status: Value,
    #[case] command: &str,
) {
    let member = providers(file).member_from_profile(&profile(status));
    assert_eq!(plan(&member).command, command);
}

#[rstest]
#[case::no_match(offering("other", cluster(json!({}))), "ProviderNotFound", &["[\"other\"]", "secretreader"])]
#[case::no_status(Value::Null, "ProviderNotFound", &["[]", "secretreader"])]
#[case::ca_file(offer(json!({"certificate-authority": "/etc/ca.pem"})), "DefinitionInvalid", &["file"])]
#[case::ca_not_base64(offer(json!({"certificate-authority-data": "%%"})), "DefinitionInvalid", &["base64"])]
#[case::ca_not_pem(offer(json!({"certificate-authority-data": "bm90IHBlbQ=="})), "DefinitionInvalid", &["certificate-authority-data"])]
#[case::no_server(offer(json!({"server": ""})), "DefinitionInvalid", &["no server"])]
#[case::ftp_server(offer(json!({"server": "ftp://h"})), "EndpointInvalid", &[])]
#[case::socks_proxy(offer(json!({"proxy-url": "socks5://p:1080"})), "ProxyInvalid", &[])]
fn an_unusable_profile_has_a_reason_and_no_plan(
    #[case] status: Value,
    #[case] want: &str,
    #[case] says: &[&str],
) {
    let config = providers(json!([secretreader("Append", "Replace")]));
    assert_unusable(&config.member_from_profile(&profile(status)), want, says);
}

fn offer(extra: Value) -> Value {
    offering("secretreader", cluster(extra))
}

fn assert_unusable(member: &ProfileMember, want: &str, says: &[&str]) {
    assert!(member.secret.is_none(), "no plugin plan");
    let (reason, text) = reason(member);
    assert_eq!(reason, want, "{text}");
    assert!(says.iter().all(|s| text.contains(s)), "{text}");
}

fn with_additions(cli: &str, env: &str) -> ProfileMember {
    let config = providers(json!([secretreader(cli, env)]));
    let extensions = json!([
        {"name": EXEC_EXTENSION, "extension": {"clusterName": "cluster1"}},
        {"name": ADDITIONAL_ARGS_EXTENSION, "extension": ["--region", "eu"]},
        {"name": ADDITIONAL_ENVS_EXTENSION, "extension": {"PLUGIN_MODE": "profile", "EXTRA": "1"}},
    ]);
    offered(&config, json!({"extensions": extensions}))
}

fn env_of(member: &ProfileMember) -> Vec<(String, String)> {
    (plan(member).env.iter())
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect()
}

#[test]
fn profile_args_are_appended_only_when_the_provider_allows() {
    assert_eq!(
        plan(&with_additions("Append", "Ignore")).args,
        ["--region", "eu"]
    );
    assert!(plan(&with_additions("Ignore", "Ignore")).args.is_empty());
}

/// What a profile adds runs only if the provider's `definitionArgs` and `definitionEnv`
/// accept it, as for any other definition; upstream's bare `Append` accepts nothing.
#[test]
fn profile_additions_run_only_as_the_providers_patterns_accept() {
    let provider = |rules: Value| {
        let mut entry = json!({"name": "secretreader",
            "execConfig": {"apiVersion": "client.authentication.k8s.io/v1",
                           "command": "/bin/sh", "args": ["--fixed"]},
            "profileSourcedCLIArgsPolicy": "Append",
            "profileSourcedEnvVarsPolicy": "Replace"});
        for (k, v) in rules.as_object().unwrap() {
            entry[k] = v.clone();
        }
        providers(json!([entry]))
    };
    let profile_with = |config: &ClusterProfileConfig, args: Value, envs: Value| {
        let extensions = json!([
            {"name": EXEC_EXTENSION, "extension": {"clusterName": "cluster1"}},
            {"name": ADDITIONAL_ARGS_EXTENSION, "extension": args},
            {"name": ADDITIONAL_ENVS_EXTENSION, "extension": envs},
        ]);
        let member = offered(config, json!({"extensions": extensions}));
        match member.secret.as_ref().unwrap().stored().unwrap() {
            StoredCredential::Exec(plan) => plan.policy(&ExecPolicy::none()).check(&plan.config),
            other => panic!("not a plugin plan: {other:?}"),
        }
    };
    let upstream = provider(json!({}));
    let refused = profile_with(&upstream, json!(["--region", "eu"]), json!({}));
    assert!(
        matches!(
            refused,
            Err(ExecError::ArgNotAllowed {
                index: 0,
                accepted: 0,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(profile_with(&upstream, json!([]), json!({})).is_ok());

    let declared = provider(json!({
        "definitionArgs": [{"pattern": "--region"}, {"pattern": "[a-z]{2}"}],
        "definitionEnv": [{"name": "AWS_REGION", "pattern": "[a-z]{2}-[a-z]+-[0-9]"}],
    }));
    assert!(
        profile_with(
            &declared,
            json!(["--region", "eu"]),
            json!({"AWS_REGION": "eu-west-1"})
        )
        .is_ok()
    );
    let refused = profile_with(&declared, json!(["--region", "/etc/passwd"]), json!({}));
    assert!(
        matches!(refused, Err(ExecError::ArgNotAllowed { index: 1, .. })),
        "{refused:?}"
    );
    let refused = profile_with(&declared, json!([]), json!({"HOME": "/tmp/evil"}));
    assert_eq!(refused.unwrap_err().condition_reason(), "ExecNotAllowed");
}

#[rstest]
#[case::ignore("Ignore", &[])]
#[case::append_if_not_exists("AppendIfNotExists", &[("EXTRA", "1")])]
#[case::replace("Replace", &[("EXTRA", "1"), ("PLUGIN_MODE", "profile")])]
fn profile_envs_follow_the_providers_policy(#[case] policy: &str, #[case] want: &[(&str, &str)]) {
    let want: Vec<(String, String)> = (want.iter())
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(env_of(&with_additions("Ignore", policy)), want);
}

#[test]
fn malformed_additions_are_definition_invalid_only_where_they_would_be_used() {
    let config = providers(json!([secretreader("Append", "Replace")]));
    let bad = json!([
        {"name": ADDITIONAL_ARGS_EXTENSION, "extension": {"not": "a list"}},
        {"name": ADDITIONAL_ENVS_EXTENSION, "extension": {"NAME": 1}},
    ]);
    let member = offered(&config, json!({"extensions": bad.clone()}));
    assert_unusable(&member, "DefinitionInvalid", &[ADDITIONAL_ARGS_EXTENSION]);
    let ignoring = providers(json!([secretreader("Ignore", "Ignore")]));
    assert!(
        offered(&ignoring, json!({"extensions": bad}))
            .definition
            .spec
            .is_ok()
    );
}

fn pinned_secretreader() -> Value {
    let mut provider = secretreader("Ignore", "Ignore");
    provider["profileConfigPins"] = json!({"clusterName": "$(PROFILE_NAME)"});
    provider["serverPatterns"] = json!(["^https://[a-z0-9.-]+\\.example:6443$"]);
    provider
}

#[rstest]
#[case::naming_another_members_cluster(
    json!({"extensions": [{"name": EXEC_EXTENSION, "extension": {"clusterName": "member1"}}]}),
    "DefinitionInvalid",
    "\"clusterName\" to \"cluster1\""
)]
#[case::whose_server_breaks_the_patterns(
    json!({"server": "https://127.0.0.2:6443"}),
    "EndpointForbidden",
    "127.0.0.2"
)]
fn a_profile_breaking_a_pin_gets_no_plan(
    #[case] extra: Value,
    #[case] want: &str,
    #[case] quoted: &str,
) {
    let config = providers(json!([pinned_secretreader()]));
    assert_unusable(&offered(&config, extra), want, &[quoted]);
}
