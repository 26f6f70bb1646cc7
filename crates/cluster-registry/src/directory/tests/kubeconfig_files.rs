//! Member files that name a kubeconfig.

use super::*;
use crate::{
    kubeconfig::{
        MAX_KUBECONFIG_BYTES,
        fixtures::{SERVER, kubeconfig},
    },
    test_ca::b64,
};
use member_client::validation::MemberEndpoint;

const MEMBER: &str = "name: m1\nkubeconfig: m1.kubeconfig\n";

#[test]
fn a_kubeconfig_file_defines_the_member_and_holds_its_credential() {
    let ca = ca_pem();
    let dir = Dir::new();
    dir.write(
        "m1.kubeconfig",
        kubeconfig(
            &[
                &format!("certificate-authority-data: {}", b64(&ca)),
                "tls-server-name: api.internal",
                "proxy-url: http://p:3128",
            ],
            &["token: kube-tok"],
        ),
    );
    let member = dir.member(MEMBER);
    let want = crate::MemberSpec {
        name: "m1".into(),
        endpoint: MemberEndpoint {
            url: SERVER.into(),
            insecure_skip_tls_verify: false,
            proxy_url: Some("http://p:3128".into()),
            tls_server_name: Some("api.internal".into()),
        },
        secret_ref: dir.key(),
        federation: None,
        mint_request: None,
    };
    assert_eq!(member.definition.spec, Ok(want));
    let cred = member.stored().unwrap().static_credential();
    assert_eq!(cred.token().unwrap().expose_secret(), "kube-tok");
    assert_eq!(cred.ca_bundle().unwrap().as_ref(), ca.as_bytes());
}

#[test]
fn a_missing_kubeconfig_is_secret_not_found() {
    let member = Dir::new().member(MEMBER);
    assert_eq!(member.refused(), &InvalidReason::SecretNotFound);
    assert!(member.secret.is_none());
}

#[test]
fn unusable_kubeconfig_files_are_secret_invalid() {
    let dir = Dir::new();
    let mut big = kubeconfig(&[], &["token: t"]);
    big.push_str(&format!("# {}\n", "x".repeat(MAX_KUBECONFIG_BYTES)));
    dir.write("garbage", "{{{").write("big", big);
    std::os::unix::fs::symlink("/etc/hostname", dir.path("out")).unwrap();
    for (path, want) in [
        ("garbage", "not valid YAML"),
        ("big", "larger than 1048576"),
        ("out", "leads out"),
        ("../m1.kubeconfig", "'..'"),
        ("/etc/hostname", "absolute path"),
    ] {
        let member = dir.member(&format!("name: m1\nkubeconfig: {path:?}\n"));
        let reason = member.refused();
        assert_eq!(
            reason.condition_reason(),
            "SecretInvalid",
            "{path}: {reason}"
        );
        assert!(reason.to_string().contains(want), "{path}: {reason}");
        assert!(member.stored().is_err(), "{path}: the store says so too");
    }
}

#[test]
fn a_kubeconfig_file_may_not_name_other_files() {
    let dir = Dir::new();
    dir.write("m1.kubeconfig", kubeconfig(&[], &["tokenFile: m1.token"]))
        .write("m1.token", "tok");
    let member = dir.member(MEMBER);
    assert!(member.definition.spec.is_ok(), "{:?}", member.definition);
    let err = member.stored().unwrap_err();
    assert!(err.to_string().contains("names a file"), "{err}");
}
