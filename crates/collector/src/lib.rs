//! The collector: long-lived informers on every member cluster that survive credential
//! rotation, status written back to the control plane, and `/metrics`, `/healthz`, `/readyz`
//! and a read API.
//!
//! [`app::run`] is the whole program and [`cli::Args`] its flags (`collector --help`);
//! [`check::run`] is `collector check`, the one-shot doctor, and [`command::Cli`] the command
//! line with both; [`reason::Reason`] is every reason it gives a member, with its
//! documentation. Nothing else is public. Run it as the `collector` binary, or in-process:
//!
//! ```no_run
//! # async fn doc() -> anyhow::Result<()> {
//! use clap::Parser as _;
//! let args = collector::cli::Args::parse_from(["collector", "--members-from", "directory", "--members-dir", "/etc/tether/members"]);
//! collector::app::run(args, async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```
//!
//! # How data flows
//! ```text
//! cluster-registry ──RegistryEvent──► Supervisor ──one per member──► MemberTask
//!                                                                     │ informers fill stores
//!                                                                     │ probe → MemberHealth
//!                                                                     ▼
//!                                      MemberStatus ─publish─► Mirror ──► read API (/api/v1)
//!                                                   ├─────────► StatusWriter ──► Cluster status + Events
//!                                                   └─────────► ProfilePublisher ──► ClusterProfiles
//! ```
//! Each member task owns its `MemberStatus` and publishes it one way: into the
//! mirror (what the read API and the metrics show) and, on the leader, into the Karmada
//! `Cluster` and the member's `ClusterProfile`. The control plane's own client is watched by a guard that decides `/readyz`.
//!
//! # Glossary
//! Each concept has one name, used in code, logs, metrics and docs:
//!
//! | noun | type | what it is |
//! | --- | --- | --- |
//! | credential state | `member_client::CredentialState` | what the member last said of the credential: unknown, valid, unauthorized (401 after a refresh), unavailable (no credential could be read) |
//! | member state | `cluster_registry::MemberState` | what the registry thinks of a member's definition: pending (its Secrets not listed yet), ready (a usable definition and credential), or invalid with its invalid reason |
//! | invalid reason | `cluster_registry::InvalidReason` | why a definition or its credential cannot be used; its name is the member's reason |
//! | failure kind | `member_client::FailureKind` | what one failed request to a member means: unauthorized (401), forbidden (403), not found, unreachable, a broken limit, a credential that could not be read; 401 and 403 are never folded together |
//! | informer state | `member::informer_state::InformerState` | one mirrored kind's informer on one member: syncing (first list not done), synced, or failing with its failure kind |
//! | member health | `member::health::MemberHealth` | the outcome of the latest probe of a member, or why it cannot be probed (`cluster_registry::InvalidReason`); decides the conditions' reasons |
//! | member status | `member::status::MemberStatus` | a member's health with its version, node summary and transition times: what becomes the `Ready` and `CredentialsValid` conditions |
//! | source state | `cluster_registry::SourceState` | whether a source of member definitions (Karmada Clusters, Argo CD Secrets, a directory) is listed |
//! | mint state | `minting::MintState` | what a member's token chain last said: fine, its token expired, or the last mint failed; overrides `CredentialsValid` |
//! | shard view | `shard::ShardView` | the live replicas of a shard group as one replica last read their Leases, and whether it is one of them |
//! | assignment | `shard::Assignment` | which replica owns which member, the same on every replica for the same view |
//! | reason | `reason::Reason` | why a member is in its state, one table for conditions, Events and `collector check`, each with its condition statuses, when it happens and its remedy |
//! | readiness | `readiness::ReadyState` | whether the collector itself should receive traffic (`/readyz`) |
//!
//! # Modules
//! - `member`: the supervisor and, per member, its task, informers, health, status and the
//!   status writer.
//! - `control_plane`: the collector's own client, the guard on its credential, leader election.
//! - `clusterprofile`: a SIG-Multicluster `ClusterProfile` per member
//!   (`--publish-clusterprofiles`).
//! - `minting`: minting each opted-in member's tokens (TokenRequest) and writing them back
//!   where its credential lives (`--mint-tokens`).
//! - `shard`: splitting the members between replicas (`--shards auto`): Leases, the
//!   assignment, ownership.
//! - `readiness`: `/readyz`'s state and the inputs that block it.
//! - `mirror`: the multi-cluster view the read API serves.
//! - `metrics`, `http`: what is served.
//! - `check`: `collector check`, which reads members as the collector does and reports each
//!   once, with the reason the collector would give and its remedy.

pub mod app;
pub mod check;
pub mod cli;
mod clusterprofile;
pub mod command;
mod control_plane;
mod http;
pub mod logs;
mod member;
mod metrics;
mod minting;
mod mirror;
mod readiness;
pub mod reason;
#[cfg(test)]
mod reference;
mod registry_builder;
mod shard;
