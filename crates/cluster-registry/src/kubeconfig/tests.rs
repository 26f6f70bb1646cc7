//! The kubeconfig parser: which cluster and user it picks, each credential kind, and what it
//! refuses.

use member_client::{CredentialKind, exec::ExecApiVersion};
use rstest::rstest;
use secrecy::ExposeSecret as _;

use super::{fixtures::*, *};
use crate::test_ca::{b64, ca_pem, client_pem};

fn key() -> CredentialKey {
    CredentialKey::new("capi", "wl1-kubeconfig")
}

fn parsed(yaml: &str) -> Result<KubeconfigMember, SourceError> {
    parse(&key(), yaml.as_bytes())
}

/// What `yaml` makes: the server and token of the member, or the error text.
fn outcome(yaml: &str) -> Result<(String, String), String> {
    let member = parsed(yaml).map_err(|err| err.to_string())?;
    let server = member.spec(String::new(), key()).unwrap().endpoint.url;
    let credential = member.credential.map_err(|err| err.to_string())?;
    let token = credential.static_credential().token().unwrap();
    Ok((server, token.expose_secret().to_owned()))
}

const TWO_CONTEXTS: &str = "\
contexts:
- {name: a, context: {cluster: ka, user: ua}}
- {name: b, context: {cluster: kb, user: ub}}
clusters:
- {name: ka, cluster: {server: 'https://a'}}
- {name: kb, cluster: {server: 'https://b'}}
users:
- {name: ua, user: {token: token-a}}
- {name: ub, user: {token: token-b}}
";

#[rstest]
#[case::current_context(&format!("current-context: b\n{TWO_CONTEXTS}"), Ok(("https://b", "token-b")))]
#[case::current_context_names_nothing(
    &format!("current-context: z\n{TWO_CONTEXTS}"),
    Err("current-context names no context")
)]
#[case::several_contexts_and_no_current_context(
    TWO_CONTEXTS,
    Err("several contexts and no current-context")
)]
#[case::the_only_context(
    "contexts: [{name: a, context: {cluster: ka, user: ua}}]\n\
     clusters: [{name: ka, cluster: {server: 'https://a'}}, {name: kb, cluster: {server: 'https://b'}}]\n\
     users: [{name: ua, user: {token: token-a}}]\n",
    Ok(("https://a", "token-a"))
)]
#[case::no_context_one_cluster_and_one_user(
    "clusters: [{name: k, cluster: {server: 'https://k'}}]\nusers: [{name: u, user: {token: token-u}}]\n",
    Ok(("https://k", "token-u"))
)]
#[case::no_context_and_two_clusters(
    "clusters: [{name: ka, cluster: {server: 'https://a'}}, {name: kb, cluster: {server: 'https://b'}}]\n\
     users: [{name: u, user: {token: t}}]\n",
    Err("not exactly one cluster and one user")
)]
#[case::context_names_a_missing_cluster(
    "contexts: [{name: a, context: {cluster: gone, user: ua}}]\nusers: [{name: ua, user: {token: t}}]\n",
    Err("names no cluster")
)]
fn the_current_context_else_the_only_one_is_read(
    #[case] yaml: &str,
    #[case] want: Result<(&str, &str), &str>,
) {
    match (outcome(yaml), want) {
        (Ok(got), Ok((server, token))) => assert_eq!(got, (server.to_owned(), token.to_owned())),
        (Err(got), Err(want)) => assert!(got.contains(want), "{got}"),
        (got, want) => panic!("got {got:?}, want {want:?}"),
    }
}

/// A fresh CA, and a kubeconfig whose cluster has its data, `tls-server-name: api.internal`
/// and `cluster`'s lines.
fn verified_by_a_ca(cluster: &[&str], user: &[&str]) -> (String, String) {
    let ca = ca_pem();
    let ca_data = format!("certificate-authority-data: {}", b64(&ca));
    let head = [ca_data.as_str(), "tls-server-name: api.internal"];
    let yaml = kubeconfig(&[&head[..], cluster].concat(), user);
    (ca, yaml)
}

#[test]
fn a_token_user_is_a_token_with_the_clusters_ca_and_settings() {
    let (ca, yaml) = verified_by_a_ca(
        &[
            "proxy-url: http://p:3128",
            "insecure-skip-tls-verify: false",
        ],
        &["token: kube-tok"],
    );
    let member = parsed(&yaml).unwrap();
    let spec = member.spec("m".into(), key()).unwrap();
    assert_eq!(spec.endpoint.url, SERVER);
    assert_eq!(
        spec.endpoint.tls_server_name.as_deref(),
        Some("api.internal")
    );
    assert_eq!(spec.endpoint.proxy_url.as_deref(), Some("http://p:3128"));
    assert!(!spec.endpoint.insecure_skip_tls_verify);
    let stored = member.credential.unwrap();
    let credential = stored.static_credential();
    assert_eq!(credential.kind(), CredentialKind::Token);
    assert_eq!(credential.token().unwrap().expose_secret(), "kube-tok");
    assert_eq!(credential.ca_bundle().unwrap().as_ref(), ca.as_bytes());
}

#[test]
fn a_client_certificate_user_is_a_client_identity() {
    let (cert, client_key) = client_pem("kubernetes-admin");
    let yaml = kubeconfig(
        &[],
        &[
            &format!("client-certificate-data: {}", b64(&cert)),
            &format!("client-key-data: {}", b64(&client_key)),
        ],
    );
    let stored = parsed(&yaml).unwrap().credential.unwrap();
    assert_eq!(stored.certificate_subject(), "kubernetes-admin");
}

#[test]
fn an_exec_user_is_an_exec_plan_told_the_clusters_settings_and_extension() {
    let (ca, yaml) = verified_by_a_ca(
        &[
            "extensions:",
            "- name: client.authentication.k8s.io/exec",
            "  extension: {audience: tether}",
            "- name: something-else",
            "  extension: {x: 1}",
        ],
        &[
            "exec:",
            "  apiVersion: client.authentication.k8s.io/v1",
            "  command: /opt/auth",
            "  args: [token]",
            "  env: [{name: REGION, value: eu-1}]",
            "  provideClusterInfo: true",
        ],
    );
    let stored = parsed(&yaml).unwrap().credential.unwrap();
    let plan = stored.exec_plan();
    assert_eq!(plan.ca_bundle.as_deref(), Some(ca.as_bytes()));
    let config = &plan.config;
    assert_eq!(
        (config.command.as_str(), config.args.as_slice()),
        ("/opt/auth", &["token".to_owned()][..])
    );
    assert_eq!(config.api_version, ExecApiVersion::V1);
    assert_eq!(config.env[0].name, "REGION");
    assert_eq!(config.env[0].value, "eu-1");
    assert!(config.provide_cluster_info);
    assert_eq!(
        config.cluster,
        Some(ExecCluster {
            certificate_authority_data: Some(ca.into_bytes()),
            tls_server_name: Some("api.internal".to_owned()),
            config: Some(serde_json::json!({"audience": "tether"})),
            ..ExecCluster::new(SERVER)
        })
    );
}

#[rstest]
// files, which a kubeconfig from a Secret or the members directory may not make Tether read
#[case::certificate_authority(&["certificate-authority: /etc/ca.crt"], &["token: t"], "certificate-authority file")]
#[case::token_file(&[], &["tokenFile: /var/run/token"], "names a file")]
#[case::client_certificate(&[], &["client-certificate: /etc/c.crt", "client-key-data: eA=="], "names a file")]
#[case::client_key(&[], &["client-certificate-data: eA==", "client-key: /etc/c.key"], "names a file")]
// ways to authenticate that Tether does not support, refused so none is silently dropped
#[case::auth_provider(&[], &["auth-provider: {name: gcp}"], "auth-provider is not supported")]
#[case::basic_auth(&[], &["username: admin", "password: hunter2"], "basic auth")]
#[case::username_alone(&[], &["username: admin", "token: t"], "basic auth")]
#[case::impersonate(&[], &["token: t", "as: system:admin"], "impersonation")]
#[case::impersonate_groups(&[], &["token: t", "as-groups: [system:masters]"], "impersonation")]
#[case::impersonate_uid(&[], &["token: t", "as-uid: '1000'"], "impersonation")]
#[case::impersonate_user_extra(&[], &["token: t", "as-user-extra: {scopes: [all]}"], "impersonation")]
// the CA
#[case::ca_not_base64(&["certificate-authority-data: '%%%'"], &["token: t"], "certificate-authority-data is not base64")]
#[case::ca_not_pem(&["certificate-authority-data: Z2FyYmFnZQ=="], &["token: t"], "certificate-authority-data: ")]
// the rest
#[case::no_credential(&[], &[], "token, client certificate or exec")]
#[case::exec_without_command(&[], &["exec: {apiVersion: client.authentication.k8s.io/v1}"], "exec has no command")]
fn what_tether_cannot_honour_is_refused(
    #[case] cluster: &[&str],
    #[case] user: &[&str],
    #[case] want: &str,
) {
    let got = outcome(&kubeconfig(cluster, user)).unwrap_err();
    assert!(got.contains(want), "{got}");
}

#[test]
fn not_yaml_and_too_large_are_refused() {
    let err = parsed("clusters: [{{{").unwrap_err().to_string();
    assert!(err.contains("not valid YAML (line 1"), "{err}");
    let mut big = kubeconfig(&[], &["token: t"]);
    big.push_str(&format!("# {}\n", "x".repeat(MAX_KUBECONFIG_BYTES)));
    let err = parsed(&big).unwrap_err().to_string();
    assert!(err.contains("larger than 1048576 bytes"), "{err}");
}

#[test]
fn errors_never_quote_the_token_or_the_key() {
    const SECRET: &str = "kube-s3cr3t-9f2c";
    let (cert, _) = client_pem("m");
    let (_, other_key) = client_pem("other");
    let key_line = other_key.lines().nth(1).unwrap().to_owned();
    let user = |lines: &[&str]| kubeconfig(&[], lines);
    let cert_data = format!("client-certificate-data: {}", b64(&cert));
    let cases = [
        // the token where a bool, a list or a map belongs
        kubeconfig(
            &[&format!("insecure-skip-tls-verify: {SECRET}")],
            &["token: t"],
        ),
        user(&[&format!("token: [{SECRET}]")]),
        kubeconfig(&[&format!("server: {{token: {SECRET}}}")], &[]),
        // broken YAML right after it
        user(&[&format!("token: {SECRET}"), "  : ]["]),
        format!("users: [{{name: u, user: {{token: {SECRET}"),
        // refused users that carry it
        user(&[&format!("token: {SECRET}"), "username: admin"]),
        user(&[&format!("password: {SECRET}")]),
        user(&[&format!("token: {SECRET}"), "tokenFile: /t"]),
        user(&[&format!(
            "auth-provider: {{name: oidc, config: {{id-token: {SECRET}}}}}"
        )]),
        user(&[&format!("token: \"{SECRET}\\n{SECRET}\"")]),
        // a key that does not fit the certificate, and one that is not base64
        user(&[&cert_data, &format!("client-key-data: {}", b64(&other_key))]),
        user(&[&cert_data, &format!("client-key-data: '{key_line}'")]),
    ];
    for yaml in cases {
        let text = match parsed(&yaml) {
            Err(err) => format!("{err} {err:?}"),
            Ok(member) => match &member.credential {
                Err(err) => format!("{err} {err:?} {member:?}"),
                Ok(_) => panic!("expected an error for\n{yaml}"),
            },
        };
        assert!(
            !text.contains(SECRET) && !text.contains(&key_line),
            "{text}\nfor\n{yaml}"
        );
    }
}

#[test]
fn debug_of_a_parsed_member_shows_no_token_and_no_env_value() {
    let yaml = kubeconfig(
        &[],
        &[
            "exec:",
            "  apiVersion: client.authentication.k8s.io/v1",
            "  command: /opt/auth",
            "  env: [{name: KEY, value: env-s3cr3t}]",
        ],
    );
    let token = kubeconfig(&[], &["token: tok-s3cr3t"]);
    let printed = format!("{:?} {:?}", parsed(&yaml).unwrap(), parsed(&token).unwrap());
    assert!(!printed.contains("s3cr3t"), "{printed}");
}

#[test]
fn an_exec_env_entry_needs_its_name_and_its_value() {
    let pair = |entries: &[(&str, &str)]| {
        (entries.iter())
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<HashMap<_, _>>()
    };
    let env = vec![pair(&[("name", "A"), ("value", "1")])];
    let vars = env_vars(Some(&env)).unwrap();
    assert_eq!((vars[0].name.as_str(), vars[0].value.as_str()), ("A", "1"));
    assert_eq!(env_vars(None).map(|v| v.len()), Some(0));
    for lacking in [pair(&[("name", "A")]), pair(&[("value", "1")])] {
        assert!(env_vars(Some(&vec![lacking])).is_none());
    }
}
