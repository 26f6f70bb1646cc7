//! Command-line flags of the `collector` binary.

use std::{net::SocketAddr, path::PathBuf};

use clap::Parser;
use member_client::{exec::RunAs, validation::Cidr};

mod choices;
mod derived;
mod federation;
mod sources;

pub use crate::{
    http::tls::CertFiles,
    minting::MintArgs,
    mirror::MirroredResource,
    shard::{ShardArgs, ShardMode},
};
pub use choices::{EndpointMode, LogColor, LogFormat, MembersFrom};
pub use federation::FederationArgs;
pub use sources::SourceArgs;

/// Watches every member cluster with credentials that survive rotation, and reports their
/// health to the control plane.
#[derive(Clone, Debug, Parser)]
#[command(name = "collector", version)]
pub struct Args {
    /// Where member clusters are defined.
    #[command(flatten)]
    pub sources: SourceArgs,

    /// Kubeconfig for the control plane. Without it the collector runs in-cluster and
    /// authenticates with its projected ServiceAccount token through the same token cache as
    /// the members (a rejected token fails /readyz and, after the grace, exits).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// The control plane's API URL when running with a token file instead of a kubeconfig.
    /// Default: from `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT` (in-cluster).
    #[arg(long, env = "TETHER_CONTROL_PLANE_URL")]
    pub control_plane_url: Option<String>,

    /// The collector's own bearer token file for the control plane (kubelet rotates it in place).
    #[arg(
        long,
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )]
    pub control_plane_token_file: PathBuf,

    /// CA bundle that verifies the control plane.
    #[arg(
        long,
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
    )]
    pub control_plane_ca_file: PathBuf,

    /// The exec credential plugins members may run, and how (JSON or YAML, the shape of
    /// upstream's ClusterProfile provider file: `providers: [{name, execConfig: {command,
    /// args, env}, definitionArgs: [{pattern}], definitionEnv: [{name, pattern}]}]`). Each
    /// plugin runs with its own fixed `args` and `env` first, then only the arguments (by
    /// position) and variables (by name) of the member definition that match a declared,
    /// fully anchored pattern. A definition naming another command, or passing anything not
    /// declared, is `ExecNotAllowed` and nothing runs. The collector does not start with an
    /// unusable file.
    #[arg(long, value_name = "FILE")]
    pub exec_plugins: Option<PathBuf>,

    /// An exec credential plugin members may run (repeatable): its absolute path, run with
    /// no argument and no variable from the definition (shorthand for a declaration in
    /// `--exec-plugins` with no fixed args or env and no `definitionArgs`/`definitionEnv`).
    /// A member whose kubeconfig, Argo CD `execProviderConfig` or member file names any other
    /// command (or a bare name that resolves on `PATH` to another file), or passes args or
    /// env, is `ExecNotAllowed`, and nothing runs. By default no plugin runs.
    #[arg(long, value_name = "PATH")]
    pub allow_exec: Vec<PathBuf>,

    /// Run exec plugins as this user and group (`UID[:GID]`, GID defaulting to UID; not 0),
    /// with no supplementary groups, so that they cannot read what only the collector's user
    /// may, such as its ServiceAccount token mounted with mode 0400. Needs CAP_SETUID,
    /// CAP_SETGID and CAP_CHOWN. Without it plugins run as the collector's own user, and a
    /// warning says so at start.
    #[arg(long, value_name = "UID[:GID]")]
    pub exec_run_as: Option<RunAs>,

    /// Seconds an exec credential plugin may run before it is killed and the member is
    /// `ExecFailed`.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub exec_timeout: u64,

    /// Exec credential plugins that may run at once, across all members. A run waits for its
    /// turn within its `--exec-timeout`, so a fleet of exec members cannot start thousands of
    /// processes together.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub exec_max_concurrent: u64,

    /// Namespaces a Karmada `Cluster`'s `secretRef` may name (repeatable, or comma-separated).
    /// A Cluster naming another is `SecretForbidden` and no Secret of that namespace is read,
    /// so whoever may write a Cluster cannot make Tether read a token from anywhere its RBAC
    /// reaches.
    #[arg(long, value_delimiter = ',', default_value = cluster_registry::DEFAULT_SECRET_NAMESPACE)]
    pub secret_namespace: Vec<String>,

    /// Also let member tokens go to addresses in this range (CIDR, repeatable), even loopback,
    /// link-local or cloud-metadata ones, which are refused by default (`EndpointForbidden`),
    /// whether a definition names them or a host name resolves to them.
    #[arg(long, value_name = "CIDR", required_if_eq("endpoint_mode", "strict"))]
    pub allow_endpoint: Vec<Cidr>,

    /// How `--allow-endpoint` is read. `default`: loopback, link-local, cloud-metadata and the
    /// other special addresses are refused, any other address is accepted, and the ranges add
    /// to what is accepted. `strict`: the ranges are the whole allow-list; a member endpoint or
    /// proxy (as written, or as its name resolves) outside every range is `EndpointForbidden`,
    /// whatever its address. `strict` needs at least one `--allow-endpoint`.
    #[arg(long = "endpoint-policy", value_enum, default_value_t = EndpointMode::Default)]
    pub endpoint_mode: EndpointMode,

    /// Accept `http://` endpoints, for members and for `--control-plane-url` / the
    /// kubeconfig's server. The token then crosses the network in clear.
    #[arg(long)]
    pub allow_plain_http: bool,

    /// Accept members with `insecureSkipTLSVerification`. Without it they are
    /// `EndpointForbidden`; with it each is logged at `warn` when defined and counted in
    /// `tether_insecure_members`.
    #[arg(long)]
    pub allow_insecure_members: bool,

    /// Only watch member Secrets with these labels (Karmada), e.g. `tether.io/member=true`.
    /// By default the Secrets referenced by Clusters are watched in their namespaces.
    #[arg(long)]
    pub secret_label_selector: Option<String>,

    /// Kinds to mirror from every member, as group/version/resource (Nodes are always watched
    /// for the node summary). Secrets, CertificateSigningRequests and the authentication.k8s.io
    /// and authorization.k8s.io kinds are refused: the read API would publish them.
    #[arg(long, value_delimiter = ',', default_value = "apps/v1/deployments")]
    pub mirror: Vec<MirroredResource>,

    /// Seconds between `/readyz` probes of each member.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub probe_period: u64,

    /// Seconds a probe waits for a member's `/readyz` before the member counts as unreachable
    /// (`Ready=False`, reason `Unreachable`): a frozen member turns unready within the probe
    /// period plus this.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub probe_timeout: u64,

    /// Seconds any request that is not a watch (to a member or to the control plane) waits for
    /// its response before it fails (never sooner; up to a tenth later, at most 1 s: deadlines
    /// are counted on one timer per member, not one per request). Open watches are bounded
    /// separately: one that stays silent for over two minutes is reconnected from where it was.
    /// A member's 429/503/504 is retried as kube retries it only while the retry starts within
    /// this of the first such answer; then the answer is reported.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout: u64,

    /// The most bytes one response of a member may hold, in MiB, unless it is a health check
    /// (`/readyz`, `/livez`, `/healthz`, `/version`: 64 KiB) or a watch: a list page (of 100
    /// objects), a get, a create. A member over it is `Ready=False`, reason `ResponseTooLarge`.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub member_response_limit_mib: u64,

    /// The most bytes one event of a member's watch may hold (the bytes between two newlines),
    /// in MiB. A member over it is `Ready=False`, reason `WatchLineTooLong`.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub member_watch_line_limit_mib: u64,

    /// The most objects of one mirrored kind (Nodes included) kept from one member; a list
    /// may also take at most twice as many pages as this needs. A member over it is
    /// `Ready=False`, reason `TooManyObjects` (or `TooManyListPages`), and its mirror of that
    /// kind does not grow.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub member_max_objects: u64,

    /// Offer HTTP/2 to members, by ALPN. A member that negotiates it gets one connection per
    /// client identity, carrying all of its watches, probes and requests up to its
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` (another connection past that); the connection is
    /// PINGed after 30 s of silence and dropped when a PING goes 15 s unanswered, failing its
    /// watches. A member (or proxy) that does not offer `h2`, and a plain-HTTP member, get
    /// HTTP/1.1: one connection per request in flight. `false`: HTTP/1.1 to every member.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub member_http2: bool,

    /// Get each mirrored kind's objects from a member by a streaming list: one watch with
    /// `sendInitialEvents=true`, which the member's apiserver answers from its watch cache,
    /// instead of paged lists. It needs the `WatchList` feature (on by default in Kubernetes
    /// 1.32 and from 1.34; off in 1.33), and is authorized as a `watch`. A member that refuses
    /// it (400 or 422 at the watch's start) gets paged lists of that kind from then on, logged
    /// at debug level. `false`: paged lists for every member.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub member_streaming_lists: bool,

    /// The share of a member credential's remaining lifetime (JWT `exp`, an exec plugin's
    /// `expirationTimestamp`, a certificate's `notAfter`), counted from when it was fetched,
    /// after which Tether fetches it again: a Secret is read again, a plugin runs again. Every
    /// credential is fetched again within 5 minutes anyway, so this decides for short-lived
    /// ones: at 0.8 a token with 4 minutes left is fetched again after 3.2 minutes, before any
    /// request meets a 401. Not when Tether mints a new token (`--mint-at-fraction`).
    #[arg(long, default_value_t = 0.8, value_parser = refresh_fraction)]
    pub credential_refresh_fraction: f64,

    /// Write `Ready`/`CredentialsValid` conditions, version and node summary into each Karmada
    /// `Cluster`'s status, and an Event per transition. Turn off beside Karmada's own status
    /// controller.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub write_status: bool,

    /// Keep one SIG-Multicluster `ClusterProfile` per member, from whatever source, current in
    /// this namespace of the control plane (which must exist, with the ClusterProfile CRD):
    /// label `x-k8s.io/cluster-manager=tether`, the member's Kubernetes version,
    /// `ControlPlaneHealthy` (the member's `Ready`) and `CredentialsValid`, and the access
    /// provider `tether` (the member's server and CA, and which Secret holds its credential,
    /// for `tether-credential`; never the credential). A member's profile is deleted with the
    /// member. Only the leader writes (`--leader-elect`).
    #[arg(long, value_name = "NAMESPACE", value_parser = namespace_name)]
    pub publish_clusterprofiles: Option<String>,

    /// Token minting.
    #[command(flatten)]
    pub mint: MintArgs,

    /// Federated members: credentials the control plane mints for them.
    #[command(flatten)]
    pub federation: FederationArgs,

    /// Sharding across replicas.
    #[command(flatten)]
    pub shard: ShardArgs,

    /// Address of the API server (/metrics, /api/v1/clusters, and /healthz, /readyz too),
    /// over TLS unless `--insecure-plain-http-listen`. At most 512 connections at once, and
    /// `--max-connections-per-peer` from one address.
    #[arg(long, default_value = "0.0.0.0:8080", env = "TETHER_LISTEN")]
    pub listen: SocketAddr,

    /// Serve `/metrics` and `/api/...` to anyone who can reach `--listen`. By default a caller
    /// needs a bearer token that the control plane accepts (TokenReview) and whose identity may
    /// `get` the request path as a non-resource URL (SubjectAccessReview; `/api/...` paths are
    /// reviewed as `/tether/api/...`, since Kubernetes grants `/api/*` to everyone), e.g.
    /// through a ClusterRole with `nonResourceURLs: ["/metrics", "/tether/api/*"]`. Required with
    /// `--members-from directory` and no control plane, where there is nothing to review
    /// against. `/healthz` and `/readyz` are always open.
    #[arg(long, env = "TETHER_INSECURE_SERVE_API")]
    pub insecure_serve_api: bool,

    /// The serving certificate of `--listen`.
    #[command(flatten)]
    pub tls_files: Option<CertFiles>,

    /// Serve `--listen` in plain HTTP: every caller's bearer token then crosses the network in
    /// clear. For local runs and tests only.
    #[arg(long, env = "TETHER_INSECURE_PLAIN_HTTP_LISTEN")]
    pub insecure_plain_http_listen: bool,

    /// Address of the probe server: `/healthz` and `/readyz` only, for the kubelet. Its
    /// connections are capped apart from `--listen`'s (64 in all, 8 per peer), so that no
    /// caller of the API port can make a probe wait.
    #[arg(long, default_value = "0.0.0.0:8081", env = "TETHER_PROBE_LISTEN")]
    pub probe_listen: SocketAddr,

    /// Connections `--listen` serves at once from one source address (0: no cap); further
    /// ones from it are closed at once. The whole port serves 512 at once.
    #[arg(long, default_value_t = crate::http::DEFAULT_MAX_CONNECTIONS_PER_PEER)]
    pub max_connections_per_peer: usize,

    /// Access reviews (TokenReview, SubjectAccessReview) a second that callers of `--listen`
    /// may make the collector ask the control plane for, on average. Answers are cached for
    /// 10 s per token and path, so only new tokens and paths count. A request needing a review
    /// beyond the rate and `--access-review-burst`, or beyond 16 reviews in flight, gets 429
    /// at once. Reviews go through a control-plane client of their own, apart from the Lease
    /// renewals and status writes.
    #[arg(long, default_value_t = crate::http::auth::DEFAULT_REVIEW_RATE, value_parser = review_rate)]
    pub access_review_rate: f64,

    /// Access reviews the collector may ask for at once beyond `--access-review-rate`.
    #[arg(long, default_value_t = crate::http::auth::DEFAULT_REVIEW_BURST, value_parser = clap::value_parser!(u32).range(1..))]
    pub access_review_burst: u32,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "TETHER_LOG_FORMAT")]
    pub log_format: LogFormat,

    /// Colour the text log: `auto` colours it only on a terminal, and not when the `NO_COLOR`
    /// environment variable is set to anything but an empty value; a file, a pipe and
    /// `kubectl logs` get plain text.
    #[arg(long, value_enum, default_value_t = LogColor::Auto, env = "TETHER_COLOR")]
    pub color: LogColor,

    /// Elect a leader through a Lease so that of several replicas exactly one writes status
    /// and Events; the others watch and serve the read API, ready to take over.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// Namespace of the leader-election Lease. Default: the pod's namespace
    /// (`POD_NAMESPACE`), else `tether-system`.
    #[arg(long, env = "POD_NAMESPACE", default_value = "tether-system")]
    pub leader_election_namespace: String,

    /// This replica's identity in the Lease and in Events. Default: `POD_NAME`, else the host
    /// name and process id.
    #[arg(long, env = "POD_NAME")]
    pub leader_election_identity: Option<String>,

    /// Seconds a leader's Lease lasts without renewal: the longest a takeover waits.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..))]
    pub leader_election_lease_seconds: u64,

    /// Seconds to keep running, not ready, while the control plane rejects the collector's own
    /// token after a re-read; then exit non-zero so kubelet mounts a fresh one.
    #[arg(long, default_value_t = 60)]
    pub self_rejected_grace: u64,
}

/// A namespace name (a DNS-1123 label).
fn namespace_name(raw: &str) -> Result<String, String> {
    cluster_registry::names::is_dns1123_label(raw)
        .then(|| raw.to_owned())
        .ok_or_else(|| format!("{raw:?} is not a namespace name (a DNS-1123 label)"))
}

/// A rate of access reviews: a positive, finite number a second.
fn review_rate(raw: &str) -> Result<f64, String> {
    let value: f64 = raw.parse().map_err(|err| format!("{err}"))?;
    (value.is_finite() && value > 0.0)
        .then_some(value)
        .ok_or_else(|| format!("{value} is not a positive number of reviews a second"))
}

/// A fraction in `(0, 1]`.
fn refresh_fraction(raw: &str) -> Result<f64, String> {
    let value: f64 = raw.parse().map_err(|err| format!("{err}"))?;
    (value > 0.0 && value <= 1.0)
        .then_some(value)
        .ok_or_else(|| format!("{value} is not in (0, 1]"))
}

#[cfg(test)]
pub(crate) mod tests;
