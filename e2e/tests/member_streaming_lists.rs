//! Streaming lists: the collector gets each mirrored kind's objects from a member by one watch
//! with `sendInitialEvents=true`, not by paged lists, where the member's apiserver serves it.
//! A member whose apiserver has the `WatchList` feature off refuses that watch (422); that
//! member is listed in pages instead, and mirrored all the same, with no relist counted.

use e2e::{
    collector_run::start_as_admin,
    limits::{HOUR, START},
    scenario::karmada_environment_from,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use testkit::{Cluster, PushMember};

/// The LIST requests for ConfigMaps that `member`'s apiserver has served.
async fn configmap_lists(member: &Cluster) -> anyhow::Result<f64> {
    let metrics = member.metrics().await?;
    Ok(metrics.sum(
        "apiserver_request_total",
        r#"verb="LIST",resource="configmaps""#,
    ))
}

/// The streaming lists of ConfigMaps whose initial events `member`'s apiserver has sent.
async fn configmap_streaming_lists(member: &Cluster) -> anyhow::Result<f64> {
    let metrics = member.metrics().await?;
    Ok(metrics.sum(
        "apiserver_watch_list_duration_seconds_count",
        r#"resource="configmaps""#,
    ))
}

#[tokio::test]
async fn a_member_is_streamed_where_it_serves_watch_list_and_listed_where_it_does_not()
-> anyhow::Result<()> {
    let config = testkit::Config::default()
        .members(2)
        .cluster_apiserver_flag("member2", "--feature-gates=WatchList=false");
    let (env, karmada) = karmada_environment_from(config).await?;
    for member in env.members() {
        member.create_namespace_named("agents").await?;
        member.create_service_account("agents", "agent").await?;
        let token = member.mint_token("agents", "agent", HOUR).await?;
        karmada.register(&PushMember::of(member, &token)).await?;
        let mut seed = ConfigMap::default();
        seed.metadata.name = Some(format!("seed-of-{}", member.name()));
        Api::<ConfigMap>::namespaced(member.admin_client()?, "agents")
            .create(&PostParams::default(), &seed)
            .await?;
    }
    // The apiservers' own informers list (or stream) ConfigMaps too: only what changes from
    // here on is the collector's.
    let mut before = Vec::new();
    for member in env.members() {
        before.push((
            configmap_lists(member).await?,
            configmap_streaming_lists(member).await?,
        ));
    }

    let collector = start_as_admin(
        env.control_plane(),
        &["--leader-elect=false", "--mirror", "v1/configmaps"],
    )
    .await?;
    for member in env.members() {
        collector.wait_member_ready(member.name(), START).await?;
        let path = format!("/api/v1/clusters/{}/core/v1/configmaps", member.name());
        let (status, body) = collector.get(&path).await?;
        assert_eq!(status, 200, "{path}: {body}");
        let seed = format!("seed-of-{}", member.name());
        assert!(body.contains(&seed), "{path} mirrors {seed}: {body}");
    }

    let (streamed, listed) = (&env.members()[0], &env.members()[1]);
    let lists = [
        configmap_lists(streamed).await? - before[0].0,
        configmap_lists(listed).await? - before[1].0,
    ];
    let streams = [
        configmap_streaming_lists(streamed).await? - before[0].1,
        configmap_streaming_lists(listed).await? - before[1].1,
    ];
    println!("ConfigMaps of member1 and member2: LISTs {lists:?}, streaming lists {streams:?}");
    assert_eq!(
        (lists[0], streams[0]),
        (0.0, 1.0),
        "member1 serves streaming lists: one, and no LIST"
    );
    assert!(
        lists[1] >= 1.0 && streams[1] == 0.0,
        "member2 refuses streaming lists: its ConfigMaps were listed"
    );
    assert_eq!(
        collector.metric("tether_relists_total", "").await?,
        0.0,
        "falling back to a list is no relist"
    );
    Ok(())
}
