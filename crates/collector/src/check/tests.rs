//! The report as printed: the table and the JSON.

use super::{
    credential::{CredentialSummary, JwtSummary},
    probe::{Access, Whoami},
    remedy::remedy,
    report::{MemberReport, Readyz, Report, SourceReport},
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
            expires_at: Some("2100-01-01T00:00:00Z".into()),
            expires_in_seconds: Some(3540),
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
}
