//! A member client whose credential source is the program's own Secret informer: a rotated
//! token is used by the next request, with no new client and no restart.
//!
//! The program watches the Secrets of one namespace (kube-runtime's `reflector`), reads the
//! member's token from that cache (keys `token` and `ca.crt`), and asks the member who it is,
//! five times a second, until SIGTERM or Ctrl-C. Write a new token into the Secret and the next
//! answer names the new identity.
//!
//! ```sh
//! KUBECONFIG=control-plane.kubeconfig SECRET_NAMESPACE=members SECRET_NAME=member1 \
//!   MEMBER_URL=https://10.0.0.1:6443 cargo run -p member-client --example own_secret_store
//! ```
//!
//! `KUBECONFIG` names the cluster that holds the Secret; `ALLOW_ENDPOINT` (a CIDR) lets the
//! member's address be one the default policy refuses, such as loopback. It prints
//! `authenticated as <user>`, then `rotation used: <old user> -> <new user>` per rotation, and
//! at the end `requests: <n> ok, <m> failed; rotations used: <r>`; it exits non-zero if a
//! request failed.

use std::time::Duration;

use anyhow::Context as _;
use async_trait::async_trait;
use futures::StreamExt as _;
use k8s_openapi::api::{authentication::v1::SelfSubjectReview, core::v1::Secret};
use kube::{
    Api, Client, ResourceExt as _,
    api::PostParams,
    runtime::{
        WatchStreamExt as _,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use member_client::{
    ClientFactory, Credential, CredentialCache, CredentialCacheConfig, CredentialHealth,
    CredentialKey, CredentialSource, FailureKind, MemberClientConfig, SourceError,
    validation::EndpointPolicy,
};

// ANCHOR: source
/// The program's informer cache of Secrets as a credential source: a fetch reads memory, never
/// the API.
struct InformerSource(Store<Secret>);

#[async_trait]
impl CredentialSource for InformerSource {
    async fn fetch(&self, key: &CredentialKey) -> Result<Credential, SourceError> {
        let secret = (self
            .0
            .get(&ObjectRef::new(&key.name).within(&key.namespace)))
        .ok_or_else(|| SourceError::NotFound { key: key.clone() })?;
        let token = (secret.data.as_ref().and_then(|data| data.get("token"))).ok_or_else(|| {
            SourceError::MissingKey {
                key: key.clone(),
                field: "token".to_owned(),
            }
        })?;
        Credential::from_token_bytes(&token.0)
    }
}
// ANCHOR_END: source

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let namespace = env("SECRET_NAMESPACE")?;
    let key = CredentialKey::new(&namespace, env("SECRET_NAME")?);
    let control_plane = Client::try_default().await?;

    // ANCHOR: informer
    let (store, writer) = reflector::store();
    let tokens = CredentialCache::new(
        InformerSource(store.clone()),
        CredentialCacheConfig::default(),
    );
    let secrets = Api::<Secret>::namespaced(control_plane, &namespace);
    let cache = tokens.clone();
    tokio::spawn(
        watcher(secrets, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .applied_objects()
            // The store holds the changed Secret before this runs: the next request reads it.
            .for_each(move |changed| {
                let (cache, namespace) = (cache.clone(), namespace.clone());
                async move {
                    match changed {
                        Ok(secret) => {
                            let key = CredentialKey::new(namespace, secret.name_any());
                            cache.invalidate(&key).await;
                        }
                        Err(err) => eprintln!("Secret watch: {err}"), // retried with backoff
                    }
                }
            }),
    );
    // ANCHOR_END: informer
    store.wait_until_ready().await?;
    let ca_bundle = (store.get(&ObjectRef::new(&key.name).within(&key.namespace)))
        .and_then(|secret| secret.data.as_ref()?.get("ca.crt").cloned())
        .with_context(|| format!("Secret {key} has no ca.crt"))?;

    // ANCHOR: client
    let config =
        MemberClientConfig::new("member", env("MEMBER_URL")?, key).with_ca_bundle(ca_bundle.0);
    let factory = ClientFactory::new(tokens).with_policy(endpoint_policy()?);
    let client = factory.build(&config, &CredentialHealth::new())?;
    // ANCHOR_END: client

    let (mut ok, mut failed, mut rotations, mut user) = (0, 0, 0, None::<String>);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            signalled = &mut shutdown => break signalled?,
            _ = tick.tick() => {}
        }
        match whoami(&client).await {
            Ok(now) if user.as_ref() == Some(&now) => ok += 1,
            Ok(now) => {
                ok += 1;
                match user.replace(now.clone()) {
                    Some(before) => {
                        rotations += 1;
                        println!("rotation used: {before} -> {now}");
                    }
                    None => println!("authenticated as {now}"),
                }
            }
            Err(err) => {
                failed += 1;
                println!("request failed ({:?}): {err}", FailureKind::of(&err));
            }
        }
    }
    println!("requests: {ok} ok, {failed} failed; rotations used: {rotations}");
    anyhow::ensure!(failed == 0, "{failed} requests failed");
    Ok(())
}

/// Who the member says the client is (a `SelfSubjectReview`, which every user may create).
async fn whoami(client: &Client) -> kube::Result<String> {
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    let user = review.status.and_then(|s| s.user_info?.username);
    Ok(user.unwrap_or_default())
}

/// The default endpoint policy, plus the range in `ALLOW_ENDPOINT` if it is set.
fn endpoint_policy() -> anyhow::Result<EndpointPolicy> {
    Ok(match std::env::var("ALLOW_ENDPOINT") {
        Ok(range) => EndpointPolicy::default().allow(range.parse()?),
        Err(_) => EndpointPolicy::default(),
    })
}

fn env(name: &str) -> anyhow::Result<String> {
    std::env::var(name).with_context(|| format!("set {name}"))
}

/// SIGTERM (how Kubernetes stops a pod) or Ctrl-C.
async fn shutdown_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => Ok(()),
        pressed = tokio::signal::ctrl_c() => pressed,
    }
}
