//! Minting is the operator's decision, bounded by the operator's caps, and renews only the
//! identity a member already has: attacks by whoever writes a member definition, against the
//! real `collector` binary and real apiservers (a hostile endpoint where only it can play the
//! part: a member apiserver that answers a TokenRequest with another identity's token).

use std::{
    net::Ipv4Addr,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use cluster_registry::minting::{AUDIENCES_ANNOTATION, EXPIRATION_ANNOTATION, MINT_ANNOTATION};
use e2e::{
    collector_run::RunningCollector,
    rotation_plane::{
        RotatingMember, RotationPlane, fast_rotation_flags, rotation_annotations, rotations,
    },
};
use testkit::{HOSTILE_USERNAME, HostileEndpoint};

/// Start-up: the registry lists, the member clients connect, the watches list.
const START: Duration = Duration::from_secs(60);
/// Long enough for a mint that would happen: a 600 s token is due after 6 s at fraction
/// 0.01, and a new leader waits 3 × 3 s + 1 s before its first.
const WOULD_HAVE_MINTED: Duration = Duration::from_secs(14);

async fn collector(plane: &RotationPlane, flags: &[&str]) -> RunningCollector {
    let flags = [&fast_rotation_flags("0.01", "3")[..], flags].concat();
    plane.start_collector(&flags).await.unwrap()
}

#[tokio::test]
async fn with_minting_off_a_definition_asking_for_rotation_gets_no_token_request()
-> anyhow::Result<()> {
    // m00 says `tether.io/mint-tokens: "true"`; the collector runs as the single replica
    // the attack needed (no leader election to hold minting back), without --mint-tokens.
    let plane = RotationPlane::start(1, 1).await?;
    let seeded = plane.karmada.secret_token("m00").await?;
    let before = plane.token_requests(1).await?;
    let collector = collector(&plane, &["--leader-elect=false"]).await;
    plane
        .karmada
        .wait_condition("m00", "Ready", "True/MemberReady", START)
        .await?;

    tokio::time::sleep(WOULD_HAVE_MINTED).await;
    let requests = plane.token_requests(1).await?;
    assert_eq!(requests, before, "no TokenRequest was sent");
    assert_eq!(plane.karmada.secret_token("m00").await?, seeded);
    assert_eq!(rotations(&collector, "m00", "success").await, 0.0);
    let message = plane.refusal("m00", "RotationNotAllowed", START).await?;
    assert!(message.contains("--mint-tokens"), "{message}");
    assert!(!message.contains(&seeded), "no token in a condition");
    Ok(())
}

#[tokio::test]
async fn a_definition_naming_another_service_account_than_its_token_is_refused_unminted()
-> anyhow::Result<()> {
    let mut plane = RotationPlane::start(1, 1).await?;
    let others = plane.karmada.secret_token("m00").await?;
    let impostor = RotatingMember::new("impostor", 1, "tether-rotation", "rot-x");
    plane.add(impostor).await?;
    // Its Secret holds rot-0's token, which may mint rot-x's: minting would switch identities.
    let member = plane.env.cluster(1);
    plane
        .karmada
        .write_secret("impostor", &others, member.ca_pem())
        .await?;
    let before = plane.token_requests(1).await?;
    let collector = collector(&plane, &["--mint-tokens-for", "impostor"]).await;

    let message = plane
        .refusal("impostor", "RotationServiceAccountMismatch", START)
        .await?;
    assert!(
        message.contains("\"system:serviceaccount:tether-rotation:rot-0\" (its sub)")
            && message.contains("nothing was minted")
            && !message.contains(&others),
        "{message}"
    );
    tokio::time::sleep(WOULD_HAVE_MINTED).await;
    assert_eq!(plane.token_requests(1).await?, before);
    assert_eq!(rotations(&collector, "impostor", "success").await, 0.0);
    assert_eq!(plane.karmada.secret_token("impostor").await?, others);
    // The member itself is left alone: its token works, it is Ready, and m00 (not allowed
    // by the operator, asking with "true") mints nothing either.
    let impostor = plane.karmada.condition("impostor", "Ready").await?;
    let ready = ("True".to_owned(), "MemberReady".to_owned());
    assert_eq!(impostor, Some(ready));
    let m00 = plane.karmada.condition("m00", "CredentialsValid").await?;
    let reason = m00.map(|(_, reason)| reason);
    assert_eq!(reason.as_deref(), Some("RotationNotAllowed"));
    Ok(())
}

#[tokio::test]
async fn a_lifetime_over_the_cap_or_an_unlisted_audience_is_refused_until_the_definition_complies()
-> anyhow::Result<()> {
    let mut plane = RotationPlane::start(1, 0).await?;
    // A day and a second: one over the default --mint-max-expiration; and an audience
    // beside the allowed one.
    let mut seeded = Vec::new();
    for (name, annotation, value) in [
        ("long", EXPIRATION_ANNOTATION, "86401"),
        (
            "aud",
            AUDIENCES_ANNOTATION,
            "https://kubernetes.default.svc,vault",
        ),
    ] {
        let member = RotatingMember::new(name, 1, "tether-rotation", name);
        seeded.push(plane.add(member).await?);
        plane.karmada.annotate(name, annotation, value).await?;
    }
    let [long, aud] = &seeded[..] else {
        unreachable!()
    };
    let before = plane.token_requests(1).await?;
    let collector = collector(
        &plane,
        &[
            "--mint-tokens-for",
            "long,aud",
            "--mint-audience",
            "https://kubernetes.default.svc",
        ],
    )
    .await;

    for name in ["long", "aud"] {
        plane
            .karmada
            .wait_condition(name, "Ready", "True/MemberReady", START)
            .await?;
    }
    // The Lease is taken first, then a new leader's wait.
    tokio::time::sleep(WOULD_HAVE_MINTED + Duration::from_secs(6)).await;
    let requests = plane.token_requests(1).await?;
    assert_eq!(requests, before, "no TokenRequest was sent");
    assert_eq!(&plane.karmada.secret_token("long").await?, long);
    assert_eq!(&plane.karmada.secret_token("aud").await?, aud);

    let message = plane.refusal("long", "RotationOverCap", START).await?;
    assert!(
        message.contains("86401 s") && message.contains("86400 s"),
        "{message}"
    );
    let message = plane.refusal("aud", "RotationOverCap", START).await?;
    assert!(
        message.contains("audience vault")
            && message.contains("--mint-audience allows only https://kubernetes.default.svc"),
        "{message}"
    );
    // Within the cap, the same member rotates: the refusal was the cap's, nothing else's.
    plane
        .karmada
        .annotate("long", EXPIRATION_ANNOTATION, "86400")
        .await?;
    plane
        .wait_rotated_from(&collector, "long", long, START)
        .await?;
    assert_eq!(&plane.karmada.secret_token("aud").await?, aud);
    assert_eq!(rotations(&collector, "aud", "success").await, 0.0);
    Ok(())
}

/// A JWT-shaped token (unsigned: only the hostile endpoint ever sees it) with these claims.
fn token(sub: &str, iss: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = serde_json::json!({
        "sub": sub, "iss": iss, "aud": ["https://kubernetes.default.svc"],
        "iat": now - 300, "nbf": now - 300, "exp": now + 600,
    });
    member_client::test_util::jwt(&claims.to_string())
}

/// The subject of a token of another ServiceAccount than the definition names.
const ADMIN_SUBJECT: &str = "system:serviceaccount:kube-system:admin";

/// A plane with member `name` served by a hostile endpoint, its Secret holding `current` and
/// its definition naming `hostile/hostile` with `annotations` besides; the endpoint mints
/// `minted`, and the collector, allowed to reach it, runs with `flags` as the only replica.
async fn hostile_member(
    name: &str,
    current: &str,
    annotations: &[(&str, &str)],
    minted: &str,
    flags: &[&str],
) -> anyhow::Result<(RotationPlane, HostileEndpoint, RunningCollector)> {
    let plane = RotationPlane::start(1, 0).await?;
    let hostile = HostileEndpoint::start(Ipv4Addr::new(127, 0, 0, 2)).await?;
    let annotations = rotation_annotations("hostile/hostile", annotations);
    let url = hostile.url();
    plane
        .register(name, &url, hostile.ca_pem(), current, &annotations)
        .await?;
    hostile.set_minted_token(minted);
    let allow = hostile.allow_endpoint_arg();
    let flags = [flags, &["--leader-elect=false", "--allow-endpoint", &allow]].concat();
    let collector = collector(&plane, &flags).await;
    Ok((plane, hostile, collector))
}

#[tokio::test]
async fn a_minted_token_of_another_issuer_or_subject_is_not_written() -> anyhow::Result<()> {
    // The member's own token, of the ServiceAccount its apiserver says it is, which is the
    // one the definition names: everything but the minted token is in order.
    let current = token(HOSTILE_USERNAME, "https://member.example");
    let other_issuer = token(HOSTILE_USERNAME, "https://attacker.example");
    let mint = [(MINT_ANNOTATION, "true")];
    let flags = ["--mint-tokens-for", "hostile"];
    let (plane, hostile, collector) =
        hostile_member("hostile", &current, &mint, &other_issuer, &flags).await?;

    let token_request = "POST /api/v1/namespaces/hostile/serviceaccounts/hostile/token";
    testkit::eventually("a TokenRequest to the member", START, || async {
        hostile
            .request_lines()
            .iter()
            .any(|line| line.starts_with(token_request))
    })
    .await?;
    // A write would follow the answer within milliseconds.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(plane.karmada.secret_token("hostile").await?, current);
    let message = plane
        .refusal("hostile", "MintedTokenMismatch", START)
        .await?;
    assert!(
        message.contains("iss \"https://attacker.example\"") && !message.contains(&other_issuer),
        "{message}"
    );
    assert!(
        !hostile.saw_bearer(&other_issuer),
        "the minted token was not even verified with"
    );
    assert_eq!(plane.karmada.secret_token("hostile").await?, current);

    // Same issuer, another subject.
    let other_subject = token(ADMIN_SUBJECT, "https://member.example");
    hostile.set_minted_token(&other_subject);
    testkit::eventually("the next mint is refused for its sub", START, || async {
        plane
            .karmada
            .condition_message("hostile", "CredentialsValid")
            .await
            .unwrap()
            .unwrap_or_default()
            .contains("sub is \"system:serviceaccount:kube-system:admin\"")
    })
    .await?;
    assert!(!hostile.saw_bearer(&other_subject));
    assert_eq!(plane.karmada.secret_token("hostile").await?, current);
    assert_eq!(rotations(&collector, "hostile", "success").await, 0.0);
    assert!(rotations(&collector, "hostile", "refused").await >= 2.0);
    Ok(())
}

#[tokio::test]
async fn another_service_accounts_token_is_not_rotated_even_where_the_member_vouches_for_it()
-> anyhow::Result<()> {
    // The endpoint's SelfSubjectReview says the token is hostile/hostile, the ServiceAccount
    // the definition names; the token itself says it is another one. Only the claims check
    // stands between them and a TokenRequest.
    let current = token(ADMIN_SUBJECT, "https://member.example");
    let minted = token(HOSTILE_USERNAME, "https://member.example");
    let (plane, hostile, collector) =
        hostile_member("vouched", &current, &[], &minted, &["--mint-tokens"]).await?;

    tokio::time::sleep(WOULD_HAVE_MINTED).await;
    let lines = hostile.request_lines();
    assert!(
        !lines.iter().any(|line| line.contains("/token")),
        "no TokenRequest: {lines:?}"
    );
    assert_eq!(plane.karmada.secret_token("vouched").await?, current);
    plane
        .refusal("vouched", "RotationServiceAccountMismatch", START)
        .await?;
    assert_eq!(rotations(&collector, "vouched", "success").await, 0.0);
    Ok(())
}
