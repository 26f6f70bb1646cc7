//! `collector check`, the real binary, against real apiservers: a good member, a revoked token,
//! missing RBAC and a wrong CA each get their own row, reason and exit code, and no token
//! reaches the output.
//!
//! Build the binary first: `cargo build -p collector --bin collector`.

use std::time::Duration;

use e2e::{collector_run::admin_args, limits::HOUR};
use serde_json::Value;
use testkit::{Environment, Karmada, PushMember};

/// The whole check: sources, then every member's checks (a few requests each).
const CHECK_LIMIT: Duration = Duration::from_secs(60);

/// Runs `collector check -o json <args>`: its exit code, its report, and all it wrote.
async fn check(args: &[String]) -> (i32, Value, String) {
    let run = e2e::collector_run::collector_check(args, CHECK_LIMIT)
        .await
        .unwrap();
    (run.code, run.report, run.output)
}

fn row<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no row for {name}: {report:#}"))
}

#[tokio::test]
async fn each_member_gets_the_reason_the_collector_would_give() -> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let (control_plane, member) = (env.control_plane(), env.cluster(1));
    let karmada = Karmada::install(control_plane).await?;
    let ns = format!("tether-check-{}", std::process::id());
    member.create_namespace_named(&ns).await?;
    member.create_service_account(&ns, "agent-a").await?;
    member.create_service_account(&ns, "gone").await?;
    // Bound to nothing: the member accepts its token and lets it do nothing.
    member.create_unbound_service_account(&ns, "bare").await?;
    let good = member.mint_token(&ns, "agent-a", HOUR).await?;
    let revoked = member.mint_token(&ns, "gone", HOUR).await?;
    let unbound = member.mint_token(&ns, "bare", HOUR).await?;
    member.revoke(&ns, "gone", &revoked).await?;
    for (name, ca_pem, token) in [
        ("good", member.ca_pem(), &good),
        ("revoked", member.ca_pem(), &revoked),
        ("norbac", member.ca_pem(), &unbound),
        // Another cluster's CA: the member's serving certificate does not verify.
        ("wrongca", control_plane.ca_pem(), &good),
    ] {
        let endpoint = member.endpoint();
        let push = PushMember {
            name,
            endpoint,
            ca_pem,
            token,
        };
        karmada.register(&push).await?;
    }
    let admin_token = control_plane.admin_token()?;
    let flags = admin_args(control_plane)?;

    let started = tokio::time::Instant::now();
    let alone = [&flags[..], &["--member".to_owned(), "good".to_owned()]].concat();
    let (code, report, _) = check(&alone).await;
    eprintln!("check --member good: {:?}", started.elapsed());
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["members"].as_array().unwrap().len(), 1);
    let ok = row(&report, "good");
    assert_eq!(ok["reason"], "MemberReady", "{ok:#}");
    assert_eq!(ok["source"], "karmada");
    assert_eq!(ok["definition"], "Karmada Cluster good");
    assert_eq!(ok["credential"]["from"], "Secret karmada-cluster/good");
    assert_eq!(ok["credential"]["kind"], "token");
    assert!(ok["credential"]["jwt"]["exp"].is_string(), "{ok:#}");
    assert!(ok["credential"]["expires_in_seconds"].as_i64().unwrap() > 3000);
    assert_eq!(
        ok["whoami"]["user"],
        format!("system:serviceaccount:{ns}:agent-a")
    );
    let access = ok["access"].as_array().unwrap();
    assert_eq!(access.len(), 2, "deployments and nodes: {ok:#}");
    assert!(
        access
            .iter()
            .all(|a| a["list"] == true && a["watch"] == true)
    );
    assert_eq!(ok["readyz"]["ok"], true);
    assert_eq!(ok["tls"]["verified"], true, "{ok:#}");
    assert_eq!(ok["tls"]["hostname_matches"], true);
    assert!(ok["tls"]["serving_not_after"].is_string());

    let started = tokio::time::Instant::now();
    let (code, report, everything) = check(&flags).await;
    eprintln!("check of four members: {:?}", started.elapsed());
    eprintln!("{report:#}");
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["usable"], false);
    assert_eq!(row(&report, "good")["reason"], "MemberReady");

    let rejected = row(&report, "revoked");
    assert_eq!(rejected["reason"], "Unauthorized", "{rejected:#}");
    assert_eq!(rejected["whoami"]["error"], "credential rejected (401)");
    let remedy = rejected["remedy"].as_str().unwrap();
    assert!(remedy.contains("mint a new token"), "{remedy}");

    let forbidden = row(&report, "norbac");
    assert_eq!(forbidden["reason"], "Forbidden", "{forbidden:#}");
    assert_eq!(
        forbidden["whoami"]["user"],
        format!("system:serviceaccount:{ns}:bare"),
        "a 403 is not a 401: the member knows who it is"
    );
    let denied = forbidden["access"].as_array().unwrap();
    assert!(
        denied
            .iter()
            .all(|a| a["list"] == false && a["watch"] == false)
    );

    let untrusted = row(&report, "wrongca");
    assert_eq!(untrusted["reason"], "Unreachable", "{untrusted:#}");
    assert_eq!(untrusted["tls"]["verified"], false);
    let error = untrusted["tls"]["error"].as_str().unwrap();
    assert!(error.contains("UnknownIssuer"), "{untrusted:#}");
    assert!(untrusted["tls"]["serving_not_after"].is_string());

    for token in [&good, &revoked, &unbound, &admin_token] {
        assert!(!everything.contains(token.as_str()), "a token was printed");
    }
    Ok(())
}
