//! Where Tether's member clusters are defined, kept current in memory.
//!
//! The registry reads member definitions from Karmada `Cluster` objects ([`karmada`]), Argo CD
//! cluster Secrets ([`ArgoCdConfig`]), kubeconfig Secrets ([`KubeconfigSecretsConfig`]),
//! SIG-Multicluster `ClusterProfile`s ([`clusterprofile`]) or a directory of member files
//! ([`DirectoryConfig`]), keeps the Secrets they reference in an in-memory [`SecretStore`] fed by watches, and serves the
//! credentials through a [`CredentialCache`](member_client::CredentialCache) over that store, so a cache
//! miss costs no API call.
//!
//! # How data flows
//! - [`RegistryBuilder`] names the sources and builds three things: the [`Registry`] handle
//!   (the token cache, each member's [`MemberState`], each source's [`SourceStates`]), the
//!   receiver of [`RegistryEvent`]s, and the [`RegistryDriver`], the future that runs the
//!   watches.
//! - Each source turns what it reads into a [`MemberSpec`] (or an [`InvalidReason`]), and
//!   parses each Secret (or token file) once, when it arrives, into the [`SecretStore`]; the
//!   token cache reads the store without parsing again.
//! - Every change is sent as a [`RegistryEvent`]: [`Upserted`](RegistryEvent::Upserted)
//!   carries the spec and its CA bundle ([`MemberSpec::client_config`] makes the client config
//!   from both); a changed token is invalidated in the cache *before*
//!   [`CredentialsRotated`](RegistryEvent::CredentialsRotated) is sent.
//!
//! ```no_run
//! # async fn doc(control_plane: kube::Client) {
//! use cluster_registry::{RegistryBuilder, RegistryEvent};
//! use member_client::{ClientFactory, CredentialHealth};
//!
//! let (registry, mut events, driver) = RegistryBuilder::new().karmada(control_plane).build();
//! let factory = ClientFactory::new(registry.tokens().clone());
//! let consume = async {
//!     while let Some(event) = events.recv().await {
//!         match event {
//!             RegistryEvent::Upserted { spec, ca_bundle } => {
//!                 let config = spec.client_config(ca_bundle);
//!                 let client = factory.build(&config, &CredentialHealth::new());
//!                 // start or replace the member's informers with `client`
//!             }
//!             RegistryEvent::CredentialsRotated { .. } => {} // the cache already has it
//!             RegistryEvent::Invalid { name, reason } => eprintln!("{name}: {reason}"),
//!             RegistryEvent::Removed(_name) => {} // stop the member
//!             _ => {}
//!         }
//!     }
//! };
//! tokio::select! { () = driver.run() => {}, () = consume => {} }
//! # }
//! ```
//!
//! # Secret formats
//! Each source's keys and files are listed in the book (`docs/src/reference/secret-formats.md`).
//! Tokens are trimmed of surrounding whitespace; a JWT's `exp` bounds its cache lifetime.
//! Which format a Secret has is decided by the Argo CD label: with
//! `argocd.argoproj.io/secret-type=cluster` it is read as Argo CD's, else as Karmada's.
//!
//! # Invalid members
//! A member that cannot be used is [`MemberState::Invalid`] with an [`InvalidReason`], whose
//! name is also its condition reason ([`InvalidReason::CONDITION_REASONS`] lists them); each
//! variant's documentation says when it happens. The endpoint, proxy and CA rules are
//! member-client's [`validation`](member_client::validation), mapped by
//! `From<ValidationError>`; a credential source's failure maps by `From<&SourceError>`. Invalid
//! input never panics and never affects another member. Two definitions of one name are both
//! `DefinitionInvalid` until only one is left.
//!
//! # Secret watches
//! Karmada: one watch per namespace that some Cluster's `secretRef` points to, started and
//! stopped as Clusters come and go (optionally narrowed by a label selector,
//! [`KarmadaConfig`]); members stay [`Pending`](MemberState::Pending) until their namespace is
//! listed, or become `SecretForbidden` if that list is refused (and Ready once a retry lists
//! it). A namespace listed once keeps its Secrets through later watch errors. Argo CD: one
//! watch per configured namespace, with the cluster label selector. No Secret is listed
//! cluster-wide.
//!
//! # Minting
//! A definition may ask Tether to mint its tokens ([`minting::MintRequest`], in
//! [`MemberSpec::mint_request`]): Karmada `Cluster` and Argo CD Secret annotations, or a
//! member file's `mint:` block. [`minting::TokenHome`] reads the token where the
//! member's credential lives and writes a new one back there, conditionally.
//!
//! # Features
//! One Cargo feature per source of definitions (`karmada`, `argocd`, `kubeconfig-secrets`,
//! `clusterprofile`, `directory`) and one for minting (`minting`), all on by default; a build
//! without a source has no module, config or builder method for it. The README lists what
//! each brings.
//!
//! # Sources
//! [`Registry::sources`] says, per source of definitions ([`Source`]), whether it is listed,
//! still listing, or failing with which error ([`SourceState`]). A consumer that cannot list
//! its definitions sees no new member and no removal; the collector reports that as not ready.

// Parts of the machinery every source shares go unused in a build without some sources (the
// Secret watches with no Secret source, say); the full build is linted for them.
#![cfg_attr(
    not(all(
        feature = "karmada",
        feature = "argocd",
        feature = "kubeconfig-secrets",
        feature = "clusterprofile",
        feature = "directory",
        feature = "minting"
    )),
    allow(dead_code)
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod admission;
#[cfg(feature = "argocd")]
mod argocd;
#[cfg(any(feature = "directory", feature = "minting"))]
mod bounded_file;
#[cfg(feature = "clusterprofile")]
pub mod clusterprofile;
#[cfg(any(feature = "karmada", feature = "clusterprofile"))]
mod crd;
#[cfg(feature = "directory")]
mod directory;
mod driver;
mod error;
mod event;
pub mod federation;
mod invalid;
#[cfg(feature = "karmada")]
pub mod karmada;
mod kubeconfig;
#[cfg(feature = "kubeconfig-secrets")]
mod kubeconfig_secrets;
mod labels;
mod member;
mod member_credentials;
mod member_table;
#[cfg(any(feature = "directory", feature = "minting"))]
mod members_dir;
#[cfg(feature = "minting")]
pub mod minting;
pub mod names;
#[cfg(test)]
mod parser_properties;
mod registry;
mod secret_binding;
#[cfg(all(
    feature = "karmada",
    feature = "argocd",
    feature = "kubeconfig-secrets"
))]
pub mod secret_credential;
mod secret_reader;
mod secret_store;
mod secret_watches;
mod source_configs;
mod source_kind;
mod source_state;
mod stored_credential;
#[cfg(test)]
mod test_ca;
mod watch;

pub use admission::DEFAULT_SECRET_NAMESPACE;
#[cfg(feature = "argocd")]
pub use argocd::ArgoCdConfig;
#[cfg(feature = "clusterprofile")]
pub use clusterprofile::ClusterProfileConfig;
#[cfg(feature = "directory")]
pub use directory::DirectoryConfig;
pub use driver::RegistryDriver;
pub use error::{Error, Result};
pub use event::RegistryEvent;
pub use invalid::{InvalidReason, MemberState};
#[cfg(feature = "karmada")]
pub use karmada::KarmadaConfig;
#[cfg(feature = "kubeconfig-secrets")]
pub use kubeconfig_secrets::KubeconfigSecretsConfig;
pub use member::{MemberDefinition, MemberSpec};
pub use member_table::Origin;
pub use registry::{Registry, RegistryBuilder};
pub use secret_binding::MEMBER_LABEL;
pub use secret_store::{SecretStore, StoredSecret};
pub use source_kind::SourceKind;
pub use source_state::{Source, SourceState, SourceStates};
