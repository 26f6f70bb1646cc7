//! Members defined the Cluster API way, one per credential kind: `<name>-kubeconfig` Secrets
//! (label `cluster.x-k8s.io/cluster-name=<name>`, key `value`) on the control plane, whose
//! kubeconfig points at a harness member with a token, a client certificate or an exec plugin;
//! the collector reading them (`--members-from capi`); and what its read API and `/metrics`
//! say of each member (only the Karmada source writes status into the control plane).
//!
//! - [`Kubeconfig`]: a kubeconfig for one harness member, with one credential kind;
//! - [`CapiPlane`]: the Secrets on the control plane, and collectors reading them;
//! - [`read_api`]: a member's conditions, mirrored objects and metrics, as the collector
//!   shows them;
//! - [`PluginFiles`], [`TokenRequestPlugin`]: the files and variables of `e2e/plugins/`.

mod capi_plane;
pub(crate) mod kubeconfig;
mod plugin_files;
pub mod read_api;

pub use capi_plane::{CAPI_CLUSTER_NAME_LABEL, CapiPlane};
pub use kubeconfig::Kubeconfig;
pub use plugin_files::{PluginFiles, TokenRequestPlugin, plugin_path};
