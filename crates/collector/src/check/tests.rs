//! The report as printed: the table and the JSON.

use super::{
    credential::{CredentialSummary, Expiry, JwtSummary},
    probe::{Access, Readyz, Whoami},
    remedy::remedy,
    report::{MemberReport, Report, SourceReport},
    table,
    tls::TlsReport,
};

fn good() -> MemberReport {
    MemberReport {
        name: "member1".into(),
        reason: "MemberReady".into(),
        message: "the member's /readyz answers with its current credential".into(),
        remedy: remedy("MemberReady"),
        usable: true,
        definition: Some("Karmada Cluster member1".into()),
        source: Some("karmada"),
        endpoint: Some("https://127.0.0.1:6443".into()),
        credential: Some(CredentialSummary {
            from: "Secret karmada-cluster/member1".into(),
            kind: Some("token"),
            jwt: Some(JwtSummary {
                iss: Some("https://kubernetes.default.svc".into()),
                aud: vec!["api".into()],
                exp: Some("2100-01-01T00:00:00Z".into()),
            }),
            expiry: Some(Expiry {
                expires_at: "2100-01-01T00:00:00Z".into(),
                expires_in_seconds: 3540,
            }),
            ..CredentialSummary::default()
        }),
        whoami: Some(Whoami {
            user: Some("system:serviceaccount:ns:agent-a".into()),
            groups: vec!["system:authenticated".into()],
            error: None,
        }),
        access: vec![Access {
            resource: "apps/v1/deployments".into(),
            list: Some(true),
            watch: Some(true),
            error: None,
        }],
        readyz: Some(Readyz {
            ok: true,
            detail: "ok".into(),
        }),
        tls: Some(TlsReport {
            trusted_ca: vec!["CN=member1 CA".into()],
            server_name: "127.0.0.1".into(),
            serving_subject: Some("CN=kube-apiserver".into()),
            serving_not_after: Some("2030-01-01T00:00:00Z".into()),
            hostname_matches: Some(true),
            verified: true,
            error: None,
        }),
    }
}

fn rejected() -> MemberReport {
    MemberReport {
        name: "revoked".into(),
        reason: "Unauthorized".into(),
        remedy: remedy("Unauthorized"),
        usable: false,
        whoami: Some(Whoami {
            error: Some("credential rejected (401)".into()),
            ..Whoami::default()
        }),
        readyz: Some(Readyz {
            ok: false,
            detail: "credential rejected (401)".into(),
        }),
        ..good()
    }
}

fn report() -> Report {
    Report::new(
        vec![SourceReport {
            source: "Karmada Clusters".into(),
            state: "Listed",
            error: None,
        }],
        vec![good(), rejected()],
    )
}

#[test]
fn the_table_has_a_row_per_member_then_the_details() {
    let text = table::render(&report());
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("MEMBER")).unwrap();
    assert!(lines[header].contains("REASON") && lines[header].contains("TLS"));
    let good_row = lines[header + 1];
    for cell in [
        "member1",
        "MemberReady",
        "system:serviceaccount:ns:agent-a",
        "token",
        "59m",
        "1/1 allowed",
        "ok",
    ] {
        assert!(good_row.contains(cell), "{cell} in {good_row:?}");
    }
    let rejected_row = lines[header + 2];
    assert!(rejected_row.contains("Unauthorized") && rejected_row.contains("(rejected)"));
    // Columns line up: every row's REASON starts where the header's does.
    let column = lines[header].find("REASON").unwrap();
    assert_eq!(good_row.find("MemberReady"), Some(column));
    assert_eq!(rejected_row.find("Unauthorized"), Some(column));
    assert!(text.contains("source Karmada Clusters: Listed"));
    assert!(text.contains("JWT iss https://kubernetes.default.svc, aud [api]"));
    assert!(text.contains("127.0.0.1 matches; verified"));
    assert!(text.contains(&format!("remedy      {}", remedy("Unauthorized"))));
}

#[test]
fn the_json_has_every_finding_and_the_verdict() {
    let json = serde_json::to_value(report()).unwrap();
    assert_eq!(json["usable"], false);
    assert_eq!(json["sources"][0]["state"], "Listed");
    let good = &json["members"][0];
    assert_eq!(good["reason"], "MemberReady");
    assert_eq!(good["usable"], true);
    assert_eq!(good["source"], "karmada");
    assert_eq!(good["credential"]["jwt"]["aud"][0], "api");
    assert_eq!(good["whoami"]["user"], "system:serviceaccount:ns:agent-a");
    assert_eq!(good["access"][0]["watch"], true);
    assert_eq!(good["tls"]["hostname_matches"], true);
    assert_eq!(
        json["members"][1]["whoami"]["error"],
        "credential rejected (401)"
    );
    assert!(
        good["credential"].get("error").is_none(),
        "absent findings are left out"
    );
    // Only an access review's own answers (allowed or not, unknown) may be null.
    let nulls: Vec<String> = null_paths(&json, String::new())
        .into_iter()
        .filter(|path| !path.contains("/access/"))
        .collect();
    assert!(
        nulls.is_empty(),
        "absent findings written as null: {nulls:?}"
    );
}

fn null_paths(value: &serde_json::Value, path: String) -> Vec<String> {
    match value {
        serde_json::Value::Null => vec![path],
        serde_json::Value::Array(items) => (items.iter().enumerate())
            .flat_map(|(i, item)| null_paths(item, format!("{path}/{i}")))
            .collect(),
        serde_json::Value::Object(fields) => (fields.iter())
            .flat_map(|(key, item)| null_paths(item, format!("{path}/{key}")))
            .collect(),
        _ => Vec::new(),
    }
}

#[tokio::test]
async fn members_are_checked_at_most_the_concurrency_at_a_time() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let names: Vec<String> = (0..40).map(|i| format!("member{i}")).collect();
    let in_flight = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    let checked = super::run::at_most(3, &names, |name| {
        let (in_flight, most) = (&in_flight, &most);
        async move {
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
            name.to_owned()
        }
    })
    .await;
    assert_eq!(checked, names, "every member, in order");
    assert_eq!(most.load(Ordering::SeqCst), 3, "never more than 3 at once");
}

/// What a hostile member or issuer writes: a forged second line, a terminal escape, and a
/// mebibyte of padding.
fn hostile() -> String {
    format!(
        "alice\nMEMBER evil MemberReady\u{1b}[2J\u{1b}[31m{}",
        "x".repeat(1 << 20)
    )
}

fn assert_sanitized(text: &str) {
    assert!(
        text.len() <= member_client::text::Text::MAX_BYTES,
        "{} bytes",
        text.len()
    );
    assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("alice"), "{text:?}");
}

#[test]
fn the_user_a_member_names_is_sanitized() {
    use k8s_openapi::api::authentication::v1::{
        SelfSubjectReview, SelfSubjectReviewStatus, UserInfo,
    };
    let review = SelfSubjectReview {
        status: Some(SelfSubjectReviewStatus {
            user_info: Some(UserInfo {
                username: Some(hostile()),
                groups: Some(vec![hostile(); 1000]),
                ..UserInfo::default()
            }),
        }),
        ..SelfSubjectReview::default()
    };
    let whoami = super::probe::answered(review);
    assert_sanitized(whoami.user.as_deref().unwrap());
    assert_eq!(whoami.groups.len(), super::probe::MAX_GROUPS);
    whoami.groups.iter().for_each(|g| assert_sanitized(g));
}

#[test]
fn a_certificate_subject_is_sanitized() {
    let mut params = rcgen::CertificateParams::new(vec!["member".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, hostile());
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.der()).unwrap();
    assert_sanitized(&super::tls::subject(&parsed));
}
