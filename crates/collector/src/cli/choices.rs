//! The closed sets of values some flags take.

use clap::ValueEnum;

/// Where member clusters are defined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MembersFrom {
    /// Karmada `Cluster` objects (push mode) and the Secrets they reference.
    Karmada,
    /// Argo CD cluster Secrets.
    Argocd,
    /// A local directory of member files; no control plane.
    Directory,
    /// Cluster API's `<cluster>-kubeconfig` Secrets (label `cluster.x-k8s.io/cluster-name`,
    /// key `value`) in `--kubeconfig-namespace`.
    Capi,
    /// Kubeconfig Secrets in Flux's format (key `value` or `value.yaml`) selected by
    /// `--kubeconfig-selector` in `--kubeconfig-namespace`; each is named after its Secret.
    Kubeconfig,
    /// SIG-Multicluster `ClusterProfile`s in `--clusterprofile-namespace`, each reached
    /// through the first of its access providers that `--clusterprofile-provider-file` serves.
    Clusterprofile,
}

impl MembersFrom {
    /// The kind of source its members come from: the `source` of every metric, the read API
    /// and `collector check`. Cluster API's and Flux's Secrets are both `kubeconfig`.
    pub fn source_kind(self) -> cluster_registry::SourceKind {
        use cluster_registry::SourceKind;
        match self {
            Self::Karmada => SourceKind::Karmada,
            Self::Argocd => SourceKind::ArgoCd,
            Self::Directory => SourceKind::Directory,
            Self::Capi | Self::Kubeconfig => SourceKind::Kubeconfig,
            Self::Clusterprofile => SourceKind::ClusterProfile,
        }
    }
}

/// How `--allow-endpoint` is read (`--endpoint-policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EndpointMode {
    /// Special addresses (loopback, link-local, cloud metadata, ...) are refused unless a range
    /// allows them; every other address is accepted.
    Default,
    /// Only addresses inside an `--allow-endpoint` range are accepted.
    Strict,
}

/// Log format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// When text logs are coloured (`--color`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogColor {
    /// Only when the log goes to a terminal and `NO_COLOR` is unset or empty.
    Auto,
    /// Always, even into a file or a pipe.
    Always,
    /// Never.
    Never,
}

impl LogColor {
    /// Whether a log written to a stream that `is_terminal` is, with `NO_COLOR` set to
    /// `no_color` (if at all), carries ANSI colour codes.
    pub fn enabled(self, is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            // https://no-color.org: any non-empty value turns colour off.
            Self::Auto => is_terminal && no_color.is_none_or(|value| value.is_empty()),
        }
    }
}
