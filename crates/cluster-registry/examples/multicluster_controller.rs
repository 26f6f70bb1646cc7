//! A multi-cluster controller: one kube-runtime `Controller` per member cluster, started and
//! stopped by the registry's events, each keeping a ConfigMap on its member as the control plane
//! wants it. Member credentials rotate underneath without a restart and without a failed
//! reconcile. Start a control plane of your own from here.
//!
//! ```sh
//! KUBECONFIG=control-plane.kubeconfig NAMESPACE=team-a \
//!   cargo run -p tether-cluster-registry --example multicluster_controller
//! ```
//!
//! Members are Karmada `Cluster`s on the control plane. On each, the controller keeps ConfigMap
//! `CONFIGMAP` (default `tether-example`) in namespace `NAMESPACE` holding `member: <name>`,
//! repairing it when it is changed or deleted; its credential needs `get`, `list`, `watch`
//! and `patch` on ConfigMaps there and `list`, `watch` on Namespaces. `ALLOW_ENDPOINT` (a CIDR)
//! lets members have addresses the default policy refuses, such as loopback. It prints
//! `started <member>`, `reconciled <member>/<namespace>/<name>`, `rotated <member>`,
//! `stopped <member>`, and at the end `reconciles: <n> ok, <m> failed`; it exits non-zero if a
//! reconcile failed.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
    time::Duration,
};

use anyhow::Context as _;
use cluster_registry::{RegistryBuilder, RegistryEvent};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams},
    runtime::{Controller, controller::Action, reflector::ObjectRef, watcher::Config},
};
use member_client::{ClientFactory, CredentialHealth, validation::EndpointPolicy};

/// Reconciled again this often even when no watch says anything changed.
const RESYNC: Duration = Duration::from_secs(300);

/// How many reconciles succeeded and failed, over every member.
#[derive(Default)]
struct Reconciles {
    ok: AtomicU64,
    failed: AtomicU64,
}

/// What each member's reconciler needs.
struct Member {
    name: String,
    namespace: String,
    configmap: String,
    configmaps: Api<ConfigMap>,
}

// ANCHOR: reconcile
/// Makes the member's ConfigMap what the control plane wants (a server-side apply).
async fn reconcile(_namespace: Arc<Namespace>, member: Arc<Member>) -> kube::Result<Action> {
    let wanted = ConfigMap {
        metadata: ObjectMeta {
            name: Some(member.configmap.clone()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("member".to_owned(), member.name.clone())])),
        ..ConfigMap::default()
    };
    let apply = PatchParams::apply("multicluster-controller").force();
    (member.configmaps)
        .patch(&member.configmap, &apply, &Patch::Apply(&wanted))
        .await?;
    Ok(Action::requeue(RESYNC))
}
// ANCHOR_END: reconcile

// ANCHOR: controller
/// Runs one member's controller until aborted, counting its reconciles in `counts`.
async fn control(member: Member, client: Client, counts: Arc<Reconciles>) {
    let by_name = |name: &str| Config::default().fields(&format!("metadata.name={name}"));
    let (namespace, configmap) = (by_name(&member.namespace), by_name(&member.configmap));
    let shown = format!("{}/{}/{}", member.name, member.namespace, member.configmap);
    Controller::new(Api::<Namespace>::all(client), namespace)
        // A change to the ConfigMap (even its deletion) reconciles its namespace.
        .watches(member.configmaps.clone(), configmap, |cm: ConfigMap| {
            cm.metadata.namespace.as_deref().map(ObjectRef::new)
        })
        .run(
            reconcile,
            |_, _, _| Action::requeue(Duration::from_secs(1)),
            Arc::new(member),
        )
        .for_each(|result| {
            match result {
                Ok(_) => {
                    counts.ok.fetch_add(1, Relaxed);
                    println!("reconciled {shown}");
                }
                Err(err) => {
                    counts.failed.fetch_add(1, Relaxed);
                    println!("reconcile failed: {shown}: {err}");
                }
            }
            std::future::ready(())
        })
        .await;
}
// ANCHOR_END: controller

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let namespace = std::env::var("NAMESPACE").context("set NAMESPACE")?;
    let configmap = std::env::var("CONFIGMAP").unwrap_or_else(|_| "tether-example".to_owned());
    let policy = match std::env::var("ALLOW_ENDPOINT") {
        Ok(range) => EndpointPolicy::default().allow(range.parse()?),
        Err(_) => EndpointPolicy::default(),
    };
    let (registry, mut events, driver) = RegistryBuilder::new()
        .endpoint_policy(policy.clone())
        .karmada(Client::try_default().await?)
        .build();
    let factory = ClientFactory::new(registry.tokens().clone()).with_policy(policy);
    let mut driver = tokio::spawn(driver.run());
    let counts = Arc::new(Reconciles::default());
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);

    // ANCHOR: events
    let mut controllers = HashMap::new();
    loop {
        let event = tokio::select! {
            signalled = &mut shutdown => break signalled?,
            ended = &mut driver => anyhow::bail!("the registry stopped: {ended:?}"),
            event = events.recv() => event.context("the registry stopped")?,
        };
        let name = event.member().to_owned();
        match event {
            // New, or its endpoint or CA changed: (re)start its controller with a new client.
            RegistryEvent::Upserted { spec, ca_bundle } => {
                let config = spec.client_config(ca_bundle);
                let client = match factory.build(&config, &CredentialHealth::new()) {
                    Ok(client) => client,
                    Err(err) => {
                        println!("skipped {name}: {err}");
                        continue;
                    }
                };
                let member = Member {
                    name: name.clone(),
                    namespace: namespace.clone(),
                    configmap: configmap.clone(),
                    configmaps: Api::namespaced(client.clone(), &namespace),
                };
                let task = tokio::spawn(control(member, client, counts.clone()));
                if let Some(old) = controllers.insert(name.clone(), task) {
                    old.abort();
                }
                println!("started {name}");
            }
            // The running controller's next request carries the new credential.
            RegistryEvent::CredentialsRotated { .. } => println!("rotated {name}"),
            RegistryEvent::Removed(_) | RegistryEvent::Invalid { .. } => {
                if let Some(task) = controllers.remove(&name) {
                    task.abort();
                    println!("stopped {name}");
                }
            }
            _ => {} // `non_exhaustive`: a later version may say more.
        }
    }
    // ANCHOR_END: events
    let (ok, failed) = (counts.ok.load(Relaxed), counts.failed.load(Relaxed));
    println!("reconciles: {ok} ok, {failed} failed");
    anyhow::ensure!(failed == 0, "{failed} reconciles failed");
    Ok(())
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
