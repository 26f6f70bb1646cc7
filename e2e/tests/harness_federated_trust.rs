//! Members that trust the control plane's ServiceAccount issuer
//! (`Config::members_trust_control_plane`), proven on real kube-apiservers: a control-plane
//! token is accepted by the member whose audience it carries and by no other, trust is turned
//! off and on at run time, and a rotated control-plane signing key keeps older tokens valid.
//!
//! Every identity is checked the way the apiserver sees it, through a `SelfSubjectReview`.

use std::collections::BTreeSet;
use std::time::Instant;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use e2e::limits::HOUR;
use serde_json::Value;
use testkit::{
    CONTROL_PLANE, Cluster, Config, Environment, ISSUER_PROBE_ACCOUNT, ISSUER_PROBE_NAMESPACE,
    client_for,
};

const AUDIENCE_PREFIX: &str = "tether.io/member/";
const USERNAME_PREFIX: &str = "control-plane:";
/// The control-plane ServiceAccount the tests mint tokens for (the collector's, in real use).
const ACCOUNT: &str = "collector";

async fn federated(members: usize) -> anyhow::Result<Environment> {
    let started = Instant::now();
    let env = Config::default()
        .members(members)
        .members_trust_control_plane(AUDIENCE_PREFIX, USERNAME_PREFIX)
        .start()
        .await?;
    eprintln!(
        "federated control plane + {members} members ready in {:?}",
        started.elapsed()
    );
    Ok(env)
}

/// A fresh namespace on the control plane holding [`ACCOUNT`], bound to nothing: the member
/// authorizes a SelfSubjectReview for any authenticated user.
async fn control_plane_account(control_plane: &Cluster) -> anyhow::Result<String> {
    let ns = control_plane.create_namespace("federated").await?;
    control_plane
        .create_unbound_service_account(&ns, ACCOUNT)
        .await?;
    Ok(ns)
}

/// The `kid` in a JWT's header: which signing key signed it.
fn kid(token: &str) -> String {
    let header = token.split('.').next().unwrap();
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
    header["kid"].as_str().unwrap().to_owned()
}

/// `GET path` on `cluster` without any credential, as a member fetches it.
async fn anonymous_get(cluster: &Cluster, path: &str) -> Value {
    let client = client_for(cluster.endpoint(), cluster.ca_pem(), None).unwrap();
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    let text = client.request_text(req).await.unwrap();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn a_member_accepts_control_plane_tokens_for_its_own_audience_while_it_trusts_them()
-> anyhow::Result<()> {
    let mut env = federated(2).await?;
    let control_plane = env.control_plane().clone();
    let (member1, member2) = (env.cluster(1).clone(), env.cluster(2).clone());
    let federation = env.federation().unwrap().clone();
    assert_eq!(federation.audience("member1"), "tether.io/member/member1");

    let ns = control_plane_account(&control_plane).await?;
    let sub = format!("system:serviceaccount:{ns}:{ACCOUNT}");
    let for_member1 = [federation.audience(member1.name())];
    let token = control_plane
        .mint_token_for(&ns, ACCOUNT, HOUR, &for_member1)
        .await?;
    let expected = format!("control-plane:{sub}");
    assert_eq!(federation.username(&sub), expected);
    assert_eq!(
        member1.authenticated_username(&token).await?,
        Some(expected),
        "member1 accepts a token for its audience, under the control plane's prefix"
    );
    assert_eq!(
        member2.authenticated_username(&token).await?,
        None,
        "member2 trusts the same issuer, but not for member1's audience"
    );
    assert_eq!(
        control_plane.authenticated_username(&token).await?,
        None,
        "the control plane's own audience is not in the token"
    );

    // A token for the control plane itself (its default audience) is no member credential.
    let own = control_plane.mint_token(&ns, ACCOUNT, HOUR).await?;
    assert_eq!(
        control_plane.authenticated_username(&own).await?,
        Some(sub),
        "the default-audience token is good where it was minted"
    );
    assert_eq!(member1.authenticated_username(&own).await?, None);
    assert_eq!(member2.authenticated_username(&own).await?, None);

    let probe_user = format!(
        "{USERNAME_PREFIX}system:serviceaccount:{ISSUER_PROBE_NAMESPACE}:{ISSUER_PROBE_ACCOUNT}"
    );
    assert_eq!(env.federated_probe(1).await?, Some(probe_user.clone()));
    assert_eq!(env.federated_probe(2).await?, Some(probe_user.clone()));

    let began = Instant::now();
    env.set_member_trust(1, false).await?;
    eprintln!(
        "member1 stopped trusting the control plane after {:?}",
        began.elapsed()
    );
    assert_eq!(env.federated_probe(1).await?, None, "member1 distrusts");
    let fresh = control_plane
        .mint_token_for(&ns, ACCOUNT, HOUR, &for_member1)
        .await?;
    assert_eq!(member1.authenticated_username(&fresh).await?, None);
    assert_eq!(
        env.federated_probe(2).await?,
        Some(probe_user.clone()),
        "member2 is not affected"
    );

    let began = Instant::now();
    env.set_member_trust(1, true).await?;
    eprintln!(
        "member1 trusted the control plane again after {:?}",
        began.elapsed()
    );
    assert_eq!(env.federated_probe(1).await?, Some(probe_user));
    let fresh = control_plane
        .mint_token_for(&ns, ACCOUNT, HOUR, &for_member1)
        .await?;
    assert!(member1.authenticated_username(&fresh).await?.is_some());
    Ok(())
}

#[tokio::test]
async fn a_rotated_control_plane_signing_key_keeps_older_tokens_valid_on_members()
-> anyhow::Result<()> {
    let mut env = federated(2).await?;
    let control_plane = env.control_plane().clone();
    let member1 = env.cluster(1).clone();
    let federation = env.federation().unwrap().clone();

    // Members find the key set through the discovery document, both anonymously.
    let discovery = anonymous_get(&control_plane, "/.well-known/openid-configuration").await;
    assert_eq!(discovery["issuer"], "https://control-plane.test");
    let jwks_uri = format!("{}/openid/v1/jwks", control_plane.endpoint());
    assert_eq!(discovery["jwks_uri"], jwks_uri.as_str());
    let kids = || async {
        let jwks = anonymous_get(&control_plane, "/openid/v1/jwks").await;
        let keys = jwks["keys"].as_array().unwrap().iter();
        keys.map(|k| k["kid"].as_str().unwrap().to_owned())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(kids().await.len(), 1, "one signing key before the rotation");

    let ns = control_plane_account(&control_plane).await?;
    let who = Some(format!(
        "{USERNAME_PREFIX}system:serviceaccount:{ns}:{ACCOUNT}"
    ));
    let for_member1 = [federation.audience(member1.name())];
    let mint = || control_plane.mint_token_for(&ns, ACCOUNT, HOUR, &for_member1);
    let (checked_before, kept) = (mint().await?, mint().await?);
    let kept_longer = mint().await?;
    assert_eq!(member1.authenticated_username(&checked_before).await?, who);

    let began = Instant::now();
    env.rotate_signing_key(CONTROL_PLANE).await?;
    eprintln!(
        "control plane key rotated (restart) in {:?}",
        began.elapsed()
    );

    let after = control_plane
        .mint_token_for(&ns, ACCOUNT, HOUR, &for_member1)
        .await?;
    assert_ne!(
        kid(&kept),
        kid(&after),
        "new tokens are signed with a new key"
    );
    let expected: BTreeSet<String> = [kid(&kept), kid(&after)].into();
    assert_eq!(
        kids().await,
        expected,
        "the key set lists the old and new keys"
    );

    // `kept` was never shown to member1: its answer is no cached authentication.
    assert_eq!(
        member1.authenticated_username(&kept).await?,
        who,
        "a token signed with the old key is still accepted"
    );
    // Members hold the key set they fetched for its max-age (3600 s), unknown key or not.
    assert_eq!(
        member1.authenticated_username(&after).await?,
        None,
        "member1 does not know the new key yet"
    );
    assert_eq!(env.federated_probe(2).await?, None, "nor does member2");

    let began = Instant::now();
    env.refresh_member_keys(1).await?;
    eprintln!(
        "member1 fetched the new key set after {:?}",
        began.elapsed()
    );
    assert_eq!(
        member1.authenticated_username(&after).await?,
        who,
        "a token signed with the new key is accepted once member1 fetched the key set"
    );
    assert_eq!(
        member1.authenticated_username(&kept_longer).await?,
        who,
        "the key set member1 fetched again still lists the old key"
    );
    assert_eq!(
        env.federated_probe(2).await?,
        None,
        "member2 still does not"
    );
    Ok(())
}
