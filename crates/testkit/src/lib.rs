//! Real kube-apiservers and etcd on loopback, for Tether's tests.
//!
//! Start with [`Environment`]: one etcd and N kube-apiservers on free 127.0.0.1 ports, each a
//! "cluster" (`control-plane`, `member1`, …) with its own etcd prefix, serving CA,
//! ServiceAccount signing key and admin token. A [`Cluster`] handle gives the endpoint, the CA
//! bundle and an admin client, and creates ServiceAccounts, mints and revokes their tokens,
//! issues client certificates ([`Cluster::issue_client_cert`], from a per-cluster client CA)
//! and creates namespaces. [`Environment::restart`] restarts one apiserver on the same port,
//! optionally with a new CA; [`Environment::stop`] and [`Environment::start`] make a member
//! unreachable and bring it back.
//!
//! ```no_run
//! use std::time::Duration;
//! use testkit::{Environment, RestartOptions};
//!
//! # async fn demo() -> anyhow::Result<()> {
//! let mut env = Environment::with_members(2).await?;
//! let member = env.cluster(1); // member1
//! let ns = member.create_namespace("demo").await?;
//! member.create_service_account(&ns, "agent").await?;
//! let token = member.mint_token(&ns, "agent", Duration::from_secs(3600)).await?;
//! let agent = member.client_with_token(&token)?; // trusts only member1's CA
//! # let _ = agent;
//! member.revoke(&ns, "agent", &token).await?; // returns once the token gets 401
//!
//! env.restart(1, RestartOptions::new_ca()).await?;
//! let new_ca = env.cluster(1).ca_pem(); // handles fetched before the restart hold the old CA
//! # let _ = new_ca;
//! # Ok(()) }
//! ```
//!
//! # Federated members
//! With [`Config::members_trust_control_plane`] every member also accepts tokens the control
//! plane mints for that member's audience ([`Federation`]), through a `jwt` authenticator of
//! structured authentication configuration. [`Environment::set_member_trust`] turns that off
//! and on, [`Environment::federated_probe`] checks it, and
//! [`Environment::rotate_signing_key`] gives a cluster a new ServiceAccount signing key
//! (members cache the control plane's key set for an hour:
//! [`Environment::refresh_member_keys`] makes one fetch it again).
//!
//! # Karmada and the collector
//! [`Karmada`] installs the `Cluster` CRD on a control plane and registers harness clusters as
//! push-mode members, the way Karmada stores them. [`CollectorProcess`] runs Tether's
//! `collector` binary against a control plane ([`control_plane_flags`]) as a child process.
//! [`KarmadaControllerManager`] runs Karmada's own controller-manager (the pinned tool) there,
//! with the CRDs of its module ([`install_karmada_crds`]).
//!
//! # Hostile endpoints
//! [`HostileEndpoint`] is an HTTPS server on `127.0.0.2` and up that an attack test points a
//! definition at: it records every `Authorization` header it receives.
//!
//! # Interop programs and tools
//! [`interop::binary`] builds (or reuses) a Go program under `e2e/interop/` with
//! `hack/interop.sh`, so a test can run a real client-go consumer against the harness.
//! [`tools::binary`] does the same for the pinned Go tools under `hack/tools/` (`helm`,
//! `kustomize`, `promtool`), built by `hack/tools.sh`.
//!
//! # What it needs
//! The `kube-apiserver` and `etcd` binaries: from `$KUBEBUILDER_ASSETS` if set (the envtest
//! convention), else the repository's `.envtest/<version>/` as printed by `hack/envtest.sh`,
//! which the harness runs itself (it builds them on first use; that takes minutes and needs
//! Go). Each apiserver takes ~290 MB RSS and ~3 s to get ready.
//!
//! # No controllers run
//! There is no kube-controller-manager, so:
//! - workload status never changes by itself: [`set_deployment_status`] writes it through the
//!   `status` subresource (the only place the harness does that);
//! - aggregated ClusterRoles (`view`, `edit`) are empty: ServiceAccounts are bound to the
//!   harness's own [`READER_CLUSTER_ROLE`];
//! - legacy token Secrets stay empty: mint tokens with [`Cluster::mint_token`] (TokenRequest);
//! - a deleted namespace stays `Terminating`: use [`Cluster::create_namespace`] for a fresh one.
//!
//! # Timing
//! A deleted ServiceAccount's tokens keep working for ~10 s (the apiserver's token cache), so
//! [`Cluster::revoke`] waits, bounded by [`REVOCATION_TIMEOUT`], for a 401. Every wait in the
//! harness and the tests is one loop, [`eventually`]: it polls observed state with a bound and
//! names what it saw last; none sleeps as an assertion. [`metrics`] reads `/metrics`.
//!
//! # Logs
//! Everything is under the environment's temporary directory ([`Environment::dir`]): `etcd.log`,
//! `<cluster>/apiserver-<run>.log`. Start-up errors name the file and quote its tail; if a test
//! panics the directory is kept and its path printed.
//!
//! # Features
//! - `k3s`: `K3sCluster`, the same [`Cluster`] handle backed by k3s in a container
//!   (testcontainers); needs a Docker engine that can pull `rancher/k3s`.

mod apiserver;
mod assets;
mod client_cert;
mod cluster;
mod collector_process;
mod config;
pub mod crd;
mod environment;
mod etcd;
mod eventually;
mod federation;
mod folded_watch;
mod hack_script;
mod hostile_endpoint;
pub mod interop;
#[cfg(feature = "k3s")]
mod k3s;
pub mod karmada;
pub mod karmada_controller;
pub mod metrics;
mod namespace;
mod pki;
mod plain_http;
mod ports;
mod proc_dir;
mod process;
mod service_account;
mod status_writers;
pub mod tools;
mod workload;

pub use apiserver::Apiserver;
pub use assets::{ASSETS_ENV, Assets};
pub use client_cert::ClientCert;
pub use cluster::{Cluster, client_for, status_code};
pub use collector_process::{
    COLLECTOR_BIN_ENV, CollectorProcess, CollectorServingCert, control_plane_flags, locate_binary,
    locate_collector,
};
pub use config::Config;
pub use environment::{CONTROL_PLANE, Environment, RestartOptions};
pub use etcd::Etcd;
pub use eventually::{IntoStep, POLL_INTERVAL, Step, eventually, matching};
pub use federation::{
    Federation, ISSUER_PROBE_ACCOUNT, ISSUER_PROBE_NAMESPACE, TRUST_RELOAD_TIMEOUT,
};
pub use folded_watch::FoldedWatch;
pub use hostile_endpoint::{HOSTILE_USERNAME, HostileEndpoint, Misbehaviour};
#[cfg(feature = "k3s")]
pub use k3s::{K3S_TAG, K3sCluster};
pub use karmada::{Condition, Karmada, PushMember};
pub use karmada_controller::{KarmadaControllerManager, install_karmada_crds};
pub use plain_http::{http_get, http_get_as};
pub use ports::free_loopback_addr;
pub use proc_dir::{established_connections, proc_dir, proc_file, proc_status_bytes};
pub use service_account::{MIN_TOKEN_EXPIRY, READER_CLUSTER_ROLE, REVOCATION_TIMEOUT};
pub use status_writers::{DoubleWrite, OWNER_CONDITION, StatusWriters};
pub use workload::{deployment, set_deployment_status};
