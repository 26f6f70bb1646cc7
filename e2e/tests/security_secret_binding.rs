//! A Secret serves exactly one member. A Karmada `Cluster` that names another member's Secret
//! and points at an endpoint of its own gets `SecretForbidden`: the token never reaches that
//! endpoint, and no TokenRequest answer from it reaches member1's Secret. A Secret labelled
//! `tether.io/member` serves that member under any name, and `collector check` names each
//! Secret it refuses. The real `collector` binary, real
//! apiservers, and a hostile endpoint on 127.0.0.2.
//!
//! Build the binary first: `cargo build -p collector --bin collector`.

use std::{collections::BTreeMap, net::Ipv4Addr, time::Duration};

use cluster_registry::{MEMBER_LABEL, minting::MINT_NOW_ANNOTATION};
use e2e::{
    collector_run::{admin_args, collector_check, spawn_healthy, temp_dir},
    limits::{HOUR, PROBE},
    rotation_plane::rotation_annotations,
    scenario::karmada_environment,
};
use testkit::{HostileEndpoint, PushMember};

const START: Duration = Duration::from_secs(60);
const CONVERGE: Duration = Duration::from_secs(20);
/// How long the hostile endpoint is watched after the refusal: several probe periods, in which
/// a member that had a client would have probed and listed many times.
const WINDOW: Duration = Duration::from_secs(5);
const CHECK_LIMIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_cluster_naming_another_members_secret_never_gets_its_token() -> anyhow::Result<()> {
    let (env, plane) = karmada_environment(2).await?;
    let control_plane = env.control_plane();
    let ns = format!("tether-binding-{}", std::process::id());
    let mut tokens = Vec::new();
    for member in env.members() {
        member.create_namespace_named(&ns).await?;
        member.create_service_account(&ns, "agent-a").await?;
        tokens.push(member.mint_token(&ns, "agent-a", HOUR).await?);
    }
    let (member1, member2) = (env.cluster(1), env.cluster(2));
    // member1 as `karmadactl join` makes it: the Secret is named after the Cluster.
    plane.register(&PushMember::of(member1, &tokens[0])).await?;
    // member2's Secret has another name, and no label yet: it serves no member2.
    plane
        .write_secret("member2-creds", &tokens[1], member2.ca_pem())
        .await?;
    plane
        .create_cluster(
            "member2",
            member2.endpoint(),
            "member2-creds",
            false,
            &BTreeMap::new(),
        )
        .await?;

    let hostile = HostileEndpoint::start(Ipv4Addr::new(127, 0, 0, 2)).await?;
    let admin_token = control_plane.admin_token()?;
    let mut args = admin_args(control_plane)?;
    args.extend([
        "--probe-period".to_owned(),
        PROBE.as_secs().to_string(),
        "--allow-endpoint".to_owned(),
        hostile.allow_endpoint_arg(),
        "--allow-insecure-members".to_owned(),
        // The operator allows minting: still only for a member's own Secret.
        "--mint-tokens".to_owned(),
    ]);
    let mut collector = spawn_healthy(&args, &temp_dir("binding")?, START).await?;
    plane
        .wait_condition("member1", "Ready", "True/MemberReady", START)
        .await?;

    // The attack: a second Cluster with member1's Secret, sent to an endpoint of its own, which
    // also asks to rotate "its" token (the TokenRequest would go to that endpoint, and the
    // answer into member1's Secret).
    hostile.set_minted_token("minted-by-the-attacker");
    let rotation = rotation_annotations(&format!("{ns}/agent-a"), &[(MINT_NOW_ANNOTATION, "1")]);
    plane
        .create_cluster("evil", &hostile.url(), "member1", true, &rotation)
        .await?;
    let refused = plane
        .wait_condition("evil", "Ready", "False/SecretForbidden", CONVERGE)
        .await;
    tokio::time::sleep(WINDOW).await;
    let carried = hostile
        .authorizations()
        .iter()
        .filter(|a| a.contains(tokens[0].as_str()))
        .count();
    assert!(
        !hostile.saw_bearer(&tokens[0]),
        "member1's token reached the hostile endpoint in {carried} of {} requests",
        hostile.requests()
    );
    refused?;
    assert_eq!(
        hostile.requests(),
        0,
        "nothing may reach a refused member's endpoint: {:?}",
        hostile.request_lines()
    );
    assert_eq!(
        plane.secret_token("member1").await?,
        tokens[0],
        "member1's Secret was overwritten"
    );
    // A refusal names the Secret and the label that would bind it to the refused member.
    let names_the_secret = |says: &str, secret: &str, member: &str| {
        says.contains(&format!("Secret karmada-cluster/{secret} "))
            && says.contains(&format!("{MEMBER_LABEL}={member}"))
    };
    let message = plane.condition_message("evil", "Ready").await?.unwrap();
    assert!(names_the_secret(&message, "member1", "evil"), "{message}");
    let ready = Some(("True".to_owned(), "MemberReady".to_owned()));
    let member1 = plane.condition("member1", "Ready").await?;
    assert_eq!(member1, ready, "member1 is untouched");
    let unlabelled = plane
        .wait_condition("member2", "Ready", "False/SecretForbidden", CONVERGE)
        .await;

    // `collector check` names both refused Secrets, and probes neither.
    let checked = collector_check(&args, CHECK_LIMIT).await?;
    eprintln!("{:#}", checked.report);
    assert_eq!(checked.code, 1);
    assert_eq!(checked.row("member1")?["reason"], "MemberReady");
    for (member, secret) in [("evil", "member1"), ("member2", "member2-creds")] {
        let row = checked.row(member)?;
        assert_eq!(row["reason"], "SecretForbidden", "{row:#}");
        let says = row["message"].as_str().unwrap();
        assert!(names_the_secret(says, secret, member), "{says}");
        assert!(
            row["remedy"].as_str().unwrap().contains(MEMBER_LABEL),
            "{row:#}"
        );
    }
    for token in tokens.iter().chain([&admin_token]) {
        assert!(
            !checked.output.contains(token.as_str()),
            "a token was printed"
        );
    }
    unlabelled?;

    // The migration: labelling member2's Secret binds it, with no restart.
    plane
        .label_secret("member2-creds", MEMBER_LABEL, "member2")
        .await?;
    plane
        .wait_condition("member2", "Ready", "True/MemberReady", CONVERGE)
        .await?;

    assert!(
        !hostile.saw_bearer(&tokens[0]) && !hostile.saw_bearer(&tokens[1]),
        "a member's token reached the hostile endpoint"
    );
    assert_eq!(plane.condition("member1", "Ready").await?, ready);
    collector.terminate(Duration::from_secs(10)).await?;
    Ok(())
}
