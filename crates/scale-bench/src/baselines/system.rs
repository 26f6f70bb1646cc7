//! The systems the baselines run, each as a child process of its own.

use std::path::{Path, PathBuf};

/// One system's member client, as a process running N members.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum System {
    /// Tether's member client over its registry (`rust-anchor --system tether`).
    Tether,
    /// Karmada ≥ 1.19 (PR #7663): client-go's cached, resettable token source over a Secret GET.
    Karmada,
    /// Karmada before #7663 with its own code: v1.18.2's `util.BuildClusterConfig` copies the
    /// Secret's token into the member's `rest.Config` when the client is built (`karmada-anchor`).
    KarmadaBefore7663,
    /// Any client-go `rest.Config{BearerToken}`: the token read once, when the client is built.
    ClientGoBearerToken,
    /// Argo CD's reaction to a changed cluster Secret: stop every informer, rebuild, relist.
    ArgoCd,
    /// kube-rs with the token in its `kube::Config` (`rust-anchor --system bake-in`).
    KubeRsBakedIn,
}

/// Where the baseline programs are.
#[derive(Clone, Debug)]
pub struct Programs {
    /// `rust-anchor` (this crate's second binary).
    pub rust_anchor: PathBuf,
    /// `client-go-anchor` (built by `hack/interop.sh`).
    pub client_go_anchor: PathBuf,
    /// `karmada-anchor` (built by `hack/interop.sh`).
    pub karmada_anchor: PathBuf,
}

impl System {
    /// Every system, in table order.
    pub const ALL: [Self; 6] = [
        Self::Tether,
        Self::Karmada,
        Self::KarmadaBefore7663,
        Self::ArgoCd,
        Self::ClientGoBearerToken,
        Self::KubeRsBakedIn,
    ];

    /// A short name for the table.
    pub fn label(self) -> &'static str {
        match self {
            Self::Tether => "Tether",
            Self::Karmada => "Karmada ≥ 1.19 (#7663)",
            Self::KarmadaBefore7663 => "Karmada v1.18.2 (< #7663)",
            Self::ClientGoBearerToken => "client-go BearerToken",
            Self::ArgoCd => "Argo CD (rebuild + relist)",
            Self::KubeRsBakedIn => "kube-rs, token baked in",
        }
    }

    /// Whether it never re-reads the token after building the client.
    pub fn bakes_in(self) -> bool {
        matches!(
            self,
            Self::KarmadaBefore7663 | Self::ClientGoBearerToken | Self::KubeRsBakedIn
        )
    }

    /// The program and arguments that run it on `fleet`.
    pub fn command(self, programs: &Programs, fleet: &Path) -> tokio::process::Command {
        let (program, args): (&Path, &[&str]) = match self {
            Self::Tether => (&programs.rust_anchor, &["--system", "tether"]),
            Self::KubeRsBakedIn => (&programs.rust_anchor, &["--system", "bake-in"]),
            Self::Karmada => (&programs.client_go_anchor, &["--mode", "karmada"]),
            Self::KarmadaBefore7663 => (&programs.karmada_anchor, &[]),
            Self::ClientGoBearerToken => (&programs.client_go_anchor, &["--mode", "bearer-token"]),
            Self::ArgoCd => (&programs.client_go_anchor, &["--mode", "argocd"]),
        };
        let mut command = tokio::process::Command::new(program);
        command.args(args).arg("--fleet").arg(fleet);
        command
    }
}

/// The anchor module's `go.mod`, for the client-go version it pins.
const CLIENT_GO_ANCHOR_GO_MOD: &str = include_str!("../../anchors/client-go-anchor/go.mod");

/// The `k8s.io/client-go` version `client-go-anchor` is built with (`v0.36.5`), from its
/// `go.mod` (`karmada-anchor` has the one Karmada's `go.mod` requires).
pub fn client_go_version() -> &'static str {
    CLIENT_GO_ANCHOR_GO_MOD
        .lines()
        .find_map(|l| l.trim().strip_prefix("k8s.io/client-go "))
        .map_or("(unknown)", |v| v.split_whitespace().next().unwrap_or(v))
}

/// The Karmada anchor module's `go.mod`, for the Karmada version it pins.
const KARMADA_ANCHOR_GO_MOD: &str = include_str!("../../anchors/karmada-anchor/go.mod");

/// The `github.com/karmada-io/karmada` version `karmada-anchor` is built with (`v1.18.2`), from
/// its `go.mod`.
pub fn karmada_version() -> &'static str {
    KARMADA_ANCHOR_GO_MOD
        .lines()
        .find_map(|l| l.trim().strip_prefix("github.com/karmada-io/karmada "))
        .map_or("(unknown)", |v| v.split_whitespace().next().unwrap_or(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// client-go-anchor runs the client-go of the Kubernetes release the apiservers are built
    /// from.
    #[test]
    fn the_client_go_anchor_pins_the_client_go_of_the_pinned_kubernetes_release() {
        let versions = include_str!("../../../../hack/versions.env");
        let kubernetes = versions
            .lines()
            .find_map(|l| l.strip_prefix("KUBERNETES_VERSION="))
            .unwrap_or_default();
        let minor_patch = kubernetes.split_once('.').map_or("", |(_, rest)| rest);
        assert_eq!(client_go_version(), format!("v0.{minor_patch}"));
    }

    /// The bench's Karmada before #7663 is the Karmada the e2e suite runs beside Tether.
    #[test]
    fn the_karmada_anchor_pins_the_karmada_of_the_controller_manager_build() {
        let wrapper = include_str!("../../../../hack/tools/karmada-controller-manager/go.mod");
        let pinned = wrapper
            .lines()
            .find_map(|l| l.trim().strip_prefix("github.com/karmada-io/karmada "))
            .and_then(|v| v.split_whitespace().next())
            .unwrap_or_default();
        assert_eq!(karmada_version(), pinned);
        assert_eq!(karmada_version(), "v1.18.2");
    }
}
