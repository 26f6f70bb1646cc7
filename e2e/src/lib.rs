//! End-to-end tests of Tether against real kube-apiservers; see `tests/`. This library holds
//! what several test files share: a Karmada control plane on the testkit harness, Cluster API
//! kubeconfig Secrets with one credential kind each, the ClusterProfile inventory the collector
//! publishes into, and the collector run in-process, and for
//! the deploy manifests `kustomize build` and `helm template` of the pinned tools, the RBAC they
//! grant, and applying them to an apiserver.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a harness failure is an error with context"
)]

pub mod access_review;
pub mod child_process;
pub mod clusterprofiles;
pub mod collector_run;
pub mod helm;
pub mod informer;
pub mod interop_client;
pub mod kubeconfig_plane;
pub mod limits;
pub mod manifest;
pub mod manifest_apply;
pub mod profile_plane;
pub mod rbac_grants;
pub mod rotation_plane;
pub mod scenario;
pub mod shard_plane;
