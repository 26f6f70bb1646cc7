//! The flags that say where member clusters are defined.

use std::path::PathBuf;

use clap::Args;

use super::MembersFrom;

/// Where member clusters are defined, and where each source looks.
#[derive(Clone, Debug, Args)]
pub struct SourceArgs {
    /// Where member clusters are defined.
    #[arg(long, value_enum, default_value_t = MembersFrom::Karmada, env = "TETHER_MEMBERS_FROM")]
    pub members_from: MembersFrom,

    /// Directory of member files (with `--members-from directory`).
    #[arg(
        long,
        env = "TETHER_MEMBERS_DIR",
        required_if_eq("members_from", "directory")
    )]
    pub members_dir: Option<PathBuf>,

    /// Namespaces holding Argo CD cluster Secrets (with `--members-from argocd`).
    #[arg(long, value_delimiter = ',', default_value = "argocd")]
    pub argocd_namespace: Vec<String>,

    /// Namespaces holding kubeconfig Secrets (with `--members-from capi` or `kubeconfig`;
    /// repeatable, or comma-separated). No Secret is listed cluster-wide.
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub kubeconfig_namespace: Vec<String>,

    /// The label selector of kubeconfig Secrets (required with `--members-from kubeconfig`),
    /// e.g. `tether.io/member=true`.
    #[arg(long)]
    pub kubeconfig_selector: Option<String>,

    /// Namespaces (inventories) whose `ClusterProfile`s define members (with
    /// `--members-from clusterprofile`; repeatable, or comma-separated). No profile is listed
    /// cluster-wide.
    #[arg(
        long,
        value_delimiter = ',',
        required_if_eq("members_from", "clusterprofile")
    )]
    pub clusterprofile_namespace: Vec<String>,

    /// The provider file (upstream's JSON format) that maps a profile's access provider names
    /// to exec plugins (required with `--members-from clusterprofile`). Its commands, absolute
    /// paths, are allowed to run as if given to `--allow-exec`: a profile chooses a provider,
    /// never the program. A profile none of whose providers is in the file is
    /// `ProviderNotFound`.
    #[arg(
        long,
        value_name = "FILE",
        required_if_eq("members_from", "clusterprofile")
    )]
    pub clusterprofile_provider_file: Option<PathBuf>,
}
