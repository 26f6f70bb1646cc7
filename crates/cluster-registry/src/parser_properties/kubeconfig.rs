//! Properties of the kubeconfig parser and of member files that name every credential kind:
//! for arbitrary bytes and for kubeconfigs with the token in odd places, no panic, a member or
//! a typed error, and the token in no error and no `Debug`.

use member_client::CredentialKey;
use proptest::prelude::*;

use super::{TOKEN, check, check_error, text};
use crate::{MemberDefinition, directory, kubeconfig, test_ca::b64};

fn key() -> CredentialKey {
    CredentialKey::new("capi", "wl1-kubeconfig")
}

fn config() -> ProptestConfig {
    super::config_of(500)
}

/// Parses `raw` and checks everything it says: the error, or the member's Debug, credential
/// error and spec.
fn check_kubeconfig(raw: &[u8]) -> Result<(), TestCaseError> {
    match kubeconfig::parse(&key(), raw) {
        Err(err) => check_error(&err)?,
        Ok(member) => {
            let printed = format!("{member:?}");
            prop_assert!(!printed.contains(TOKEN), "{}", printed);
            if let Err(err) = &member.credential {
                let text = format!("{err} {err:?}");
                prop_assert!(!text.contains(TOKEN), "{}", text);
            }
            let spec = member.spec("wl1".to_owned(), key());
            check(
                MemberDefinition {
                    name: "wl1".to_owned(),
                    spec,
                },
                false,
            )?;
        }
    }
    Ok(())
}

/// A user entry with the token where it belongs, where it does not, and in entries Tether
/// refuses.
fn user() -> impl Strategy<Value = String> {
    let exec = |env: String| {
        format!("exec: {{apiVersion: client.authentication.k8s.io/v1, command: /opt/auth, {env}}}")
    };
    prop_oneof![
        Just(format!("token: {TOKEN}")),
        Just(format!("token: \"{TOKEN}\\n{TOKEN}\"")),
        Just(format!("token: \" {TOKEN}\\u0000\"")),
        Just(format!("token: [{TOKEN}]")),
        Just(format!("token: {{a: {TOKEN}}}")),
        Just(format!("tokne: {TOKEN}")),
        Just(format!("username: admin\n    password: {TOKEN}")),
        Just(format!("token: {TOKEN}\n    as: system:admin")),
        Just(format!("token: {TOKEN}\n    tokenFile: /t")),
        Just(format!(
            "client-certificate-data: {TOKEN}\n    client-key-data: {TOKEN}"
        )),
        Just(format!(
            "client-certificate-data: {}\n    client-key-data: {}",
            b64(TOKEN),
            b64(&format!(
                "-----BEGIN PRIVATE KEY-----\n{TOKEN}\n-----END PRIVATE KEY-----\n"
            ))
        )),
        Just(format!(
            "auth-provider: {{name: oidc, config: {{id-token: {TOKEN}}}}}"
        )),
        Just(exec(format!("env: [{{name: K, value: {TOKEN}}}]"))),
        Just(exec(format!("env: [{{name: K, valeu: {TOKEN}}}]"))),
        Just(exec(format!("env: [{TOKEN}]"))),
        Just(exec(format!("env: {TOKEN}"))),
        Just(format!(
            "exec: {{command: /opt/auth, env: [{{name: K, value: {TOKEN}}}]}}"
        )),
    ]
}

/// Cluster lines: good, bad and token-bearing values where the cluster's settings go.
fn cluster() -> impl Strategy<Value = Vec<String>> {
    let line = prop_oneof![
        Just("insecure-skip-tls-verify: true".to_owned()),
        Just(format!("insecure-skip-tls-verify: {TOKEN}")),
        Just(format!("certificate-authority-data: {TOKEN}")),
        Just(format!("certificate-authority-data: {}", b64(TOKEN))),
        Just("certificate-authority: /etc/ca.crt".to_owned()),
        Just(format!(
            "extensions: [{{name: client.authentication.k8s.io/exec, extension: {{key: {TOKEN}}}}}]"
        )),
        text().prop_map(|name| format!("tls-server-name: {name:?}")),
        text().prop_map(|proxy| format!("proxy-url: {proxy:?}")),
    ];
    proptest::collection::vec(line, 0..3)
}

/// A kubeconfig (current context or not, server good or odd) made of `cluster()` and
/// `user()`, optionally broken by a cut or an inserted character.
fn kubeconfig_yaml() -> impl Strategy<Value = String> {
    let server = prop_oneof![Just("https://10.0.0.1:6443".to_owned()), text()];
    let contexts = prop_oneof![
        Just("current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"),
        Just("contexts: [{name: c, context: {cluster: k, user: u}}]\n"),
        Just(""),
        Just("current-context: gone\n"),
    ];
    let breakage = proptest::option::of((any::<prop::sample::Index>(), "[\\[\\]{}:\"'\n -]?"));
    (contexts, server, cluster(), user(), breakage).prop_map(
        |(contexts, server, cluster, user, breakage)| {
            let cluster: String = cluster.iter().map(|l| format!("    {l}\n")).collect();
            let yaml = format!(
                "{contexts}clusters:\n- name: k\n  cluster:\n    server: {server:?}\n{cluster}\
                 users:\n- name: u\n  user:\n    {user}\n"
            );
            match breakage {
                None => yaml,
                Some((at, insert)) => {
                    let mut at = at.index(yaml.len() + 1);
                    while !yaml.is_char_boundary(at) {
                        at -= 1;
                    }
                    if insert.is_empty() {
                        yaml[..at].to_owned()
                    } else {
                        format!("{}{insert}{}", &yaml[..at], &yaml[at..])
                    }
                }
            }
        },
    )
}

/// A member file naming any mix of credential keys, in a directory where every credential
/// file holds the token.
fn member_file() -> impl Strategy<Value = String> {
    let keys = proptest::sample::subsequence(
        vec![
            "apiEndpoint: https://10.0.0.1:6443".to_owned(),
            "tokenFile: t".to_owned(),
            "clientCertFile: c.crt".to_owned(),
            "clientKeyFile: c.key".to_owned(),
            "caFile: ca.crt".to_owned(),
            "kubeconfig: m.kubeconfig".to_owned(),
            "proxyURL: http://p:3128".to_owned(),
            "insecureSkipTLSVerification: true".to_owned(),
            format!(
                "exec: {{apiVersion: client.authentication.k8s.io/v1, command: /opt/auth, \
                 env: [{{name: K, value: {TOKEN}}}]}}"
            ),
            format!(
                "exec: {{apiVersion: client.authentication.k8s.io/v1, command: /a, env: [{TOKEN}]}}"
            ),
        ],
        0..5,
    );
    keys.prop_map(|keys| format!("name: m1\n{}\n", keys.join("\n")))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_are_a_kubeconfig_member_or_a_typed_error(
        raw in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..256),
            ("\\PC{0,40}", "\\PC{0,40}").prop_map(|(a, b)| format!("{a}{TOKEN}{b}").into_bytes()),
            ("[a-z-]{1,20}", "[ :\\[{\"'\n]{0,3}")
                .prop_map(|(k, sep)| format!("{k}:{sep}{TOKEN}").into_bytes()),
        ],
    ) {
        check_kubeconfig(&raw)?;
    }

    #[test]
    fn oversized_kubeconfigs_are_members_or_bounded_typed_errors(
        yaml in kubeconfig_yaml(),
        long in super::long(),
        at in any::<prop::sample::Index>(),
    ) {
        // The long text spliced in anywhere: a value, a key, or between them.
        let cut = (0..=yaml.len()).filter(|i| yaml.is_char_boundary(*i)).collect::<Vec<_>>();
        let cut = cut[at.index(cut.len())];
        check_kubeconfig(format!("{}{long}{}", &yaml[..cut], &yaml[cut..]).as_bytes())?;
    }

    #[test]
    fn kubeconfigs_with_the_token_in_odd_places_are_members_or_typed_errors(
        yaml in kubeconfig_yaml(),
    ) {
        check_kubeconfig(yaml.as_bytes())?;
    }

    #[test]
    fn member_files_of_every_credential_kind_never_show_the_token(
        yaml in member_file(),
        kubeconfig in kubeconfig_yaml(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in [
            ("t", TOKEN.to_owned()),
            ("c.crt", format!("-----BEGIN CERTIFICATE-----\n{TOKEN}\n-----END CERTIFICATE-----\n")),
            ("c.key", format!("-----BEGIN PRIVATE KEY-----\n{TOKEN}\n-----END PRIVATE KEY-----\n")),
            ("ca.crt", TOKEN.to_owned()),
            ("m.kubeconfig", kubeconfig),
            ("m1.yaml", yaml),
        ] {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let scanned = directory::read_member_blocking(dir.path(), dir.path().join("m1.yaml"));
        let printed = format!("{scanned:?}");
        prop_assert!(!printed.contains(TOKEN), "{}", printed);
        if let Some(Err(err)) = scanned.secret.as_ref().map(|s| s.stored()) {
            let text = format!("{err}");
            prop_assert!(!text.contains(TOKEN), "{}", text);
        }
        check(scanned.definition, false)?;
    }
}
