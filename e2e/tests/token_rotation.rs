//! The collector minting member tokens itself (`--mint-tokens`) against real apiservers: a
//! member that may not mint, an expired chain and its re-seeding, and a manual rotation with
//! the shipped member RBAC. The fleet, the handover, the other homes (Argo CD, member files)
//! and the operator's bounds (`security_rotation_bounds`) have files of their own.

use std::time::Duration;

use cluster_registry::minting::MINT_NOW_ANNOTATION;
use e2e::{
    collector_run::RunningCollector,
    manifest::parse_documents,
    manifest_apply::apply_object,
    rotation_plane::{MEMBER_RBAC_YAML, RotationPlane, fast_rotation_flags, rotations},
    scenario::events_about,
};
use testkit::{eventually, karmada::SECRET_NAMESPACE};

/// Start-up: the registry lists, the member clients connect, the watches list.
const START: Duration = Duration::from_secs(60);
/// A 600 s token is replaced after 6 s at this fraction.
const FAST: &str = "0.01";

async fn start_collector(plane: &RotationPlane, fraction: &str) -> RunningCollector {
    let flags = [&["--mint-tokens"][..], &fast_rotation_flags(fraction, "3")].concat();
    plane.start_collector(&flags).await.unwrap()
}

/// A plane with `minting` members that may mint and member `name` whose ServiceAccount
/// `ns/account` may not ([`RotationPlane::add_unminting`]), and `name`'s token.
async fn with_unminting(
    minting: usize,
    (name, ns, account): (&str, &str, &str),
) -> anyhow::Result<(RotationPlane, String)> {
    let mut plane = RotationPlane::start(1, minting).await?;
    let token = plane.add_unminting(name, ns, account).await?;
    Ok((plane, token))
}

/// Polls until an Event with `reason` is on member `name`'s Secret.
async fn wait_secret_event(plane: &RotationPlane, name: &str, reason: &str) -> anyhow::Result<()> {
    eventually(
        &format!("a {reason} Event on {name}'s Secret"),
        START,
        || async {
            let events = events_about(plane.karmada.client(), Some(SECRET_NAMESPACE), name).await;
            (events.unwrap().iter()).any(|e| e.reason.as_deref() == Some(reason))
        },
    )
    .await
}

#[tokio::test]
async fn a_member_that_may_not_mint_is_rotation_failed_and_keeps_working_while_others_rotate()
-> anyhow::Result<()> {
    let (plane, token) = with_unminting(1, ("refused", "no-minting", "plain")).await?;
    let karmada = &plane.karmada;
    let collector = start_collector(&plane, FAST).await;

    karmada
        .wait_condition("refused", "CredentialsValid", "False/RotationFailed", START)
        .await?;
    let message = karmada.condition_message("refused", "CredentialsValid");
    let message = message.await?.unwrap_or_default();
    assert!(
        message.contains("(403)") && message.contains("forbidden"),
        "the apiserver's refusal is quoted: {message}"
    );
    assert_eq!(
        karmada.condition("refused", "Ready").await?,
        Some(("True".to_owned(), "MemberReady".to_owned())),
        "its current token still works"
    );
    assert_eq!(karmada.secret_token("refused").await?, token);
    assert_eq!(plane.env.cluster(1).token_status(&token).await?, 200);
    wait_secret_event(&plane, "refused", "RotationFailed").await?;
    assert!(rotations(&collector, "refused", "failed").await >= 1.0);

    // The other member is unaffected: it rotates and stays accepted.
    eventually("m00 rotates twice", START, || async {
        rotations(&collector, "m00", "success").await >= 2.0
    })
    .await?;
    assert_eq!(
        karmada.condition("m00", "CredentialsValid").await?,
        Some(("True".to_owned(), "CredentialsAccepted".to_owned()))
    );
    Ok(())
}

/// A JWT-shaped token whose `exp` has passed, as a Secret holds after Tether was down past it.
fn expired_token() -> String {
    member_client::test_util::jwt(
        r#"{"sub":"system:serviceaccount:tether-rotation:rot-0","iss":"https://kubernetes.default.svc.cluster.local","iat":1700000000,"exp":1700000600}"#,
    )
}

#[tokio::test]
async fn an_expired_chain_is_token_expired_until_a_fresh_token_reseeds_it() -> anyhow::Result<()> {
    let plane = RotationPlane::start(1, 1).await?;
    let (karmada, member) = (&plane.karmada, plane.env.cluster(1));
    karmada
        .write_secret("m00", &expired_token(), member.ca_pem())
        .await?;
    let collector = start_collector(&plane, FAST).await;

    karmada
        .wait_condition("m00", "CredentialsValid", "False/TokenExpired", START)
        .await?;
    assert!(rotations(&collector, "m00", "expired").await >= 1.0);
    assert_eq!(
        rotations(&collector, "m00", "success").await,
        0.0,
        "nothing minted"
    );
    wait_secret_event(&plane, "m00", "TokenExpired").await?;

    // Re-seed: a fresh token written by hand restarts the chain.
    let fresh = member
        .mint_token("tether-rotation", "rot-0", testkit::MIN_TOKEN_EXPIRY)
        .await?;
    karmada.write_secret("m00", &fresh, member.ca_pem()).await?;
    // The re-seeded chain rotates.
    plane
        .wait_rotated_from(&collector, "m00", &fresh, START)
        .await?;
    Ok(())
}

#[tokio::test]
async fn rotate_now_mints_at_once_with_the_shipped_member_rbac_and_relists_nothing()
-> anyhow::Result<()> {
    let (plane, seeded) = with_unminting(0, ("shipped", "tether-member", "tether")).await?;
    let karmada = &plane.karmada;
    let admin = plane.env.cluster(1).admin_client()?;
    for object in parse_documents(MEMBER_RBAC_YAML, "token-rotation.yaml")? {
        apply_object(&admin, &object).await?;
    }
    // At 0.8 of 600 s nothing is due for 8 minutes: only the request can mint.
    let collector = start_collector(&plane, "0.8").await;
    karmada
        .wait_condition("shipped", "Ready", "True/MemberReady", START)
        .await?;
    // Past the new leader's wait before its first mint (3 × 3 s + 1 s), nothing was minted.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(karmada.secret_token("shipped").await?, seeded);

    for (request, minted) in [("1", 1.0), ("1", 1.0), ("2", 2.0)] {
        karmada
            .annotate("shipped", MINT_NOW_ANNOTATION, request)
            .await?;
        // Well within that wait: the running chain takes the request, nothing restarts.
        let quick = Duration::from_secs(5);
        eventually(&format!("mint-now={request}"), quick, || async {
            rotations(&collector, "shipped", "success").await >= minted
        })
        .await?;
        // A request already handled asks for nothing more.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(rotations(&collector, "shipped", "success").await, minted);
    }
    assert_ne!(karmada.secret_token("shipped").await?, seeded);
    assert_eq!(
        collector.metric("tether_relists_total", "").await?,
        0.0,
        "a mint-now annotation rebuilds no client"
    );
    karmada
        .wait_condition(
            "shipped",
            "CredentialsValid",
            "True/CredentialsAccepted",
            START,
        )
        .await?;
    Ok(())
}
