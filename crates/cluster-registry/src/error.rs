//! The crate's error type.

use std::path::PathBuf;

/// What can go wrong outside a single member's definition.
///
/// A bad definition or Secret is never an `Error`: it becomes that member's
/// [`InvalidReason`](crate::InvalidReason). These are the failures of the registry itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The members directory could not be listed. Transient: the next poll tries again, and
    /// the members read so far are kept meanwhile.
    #[error("listing the members directory {path:?} failed")]
    ReadDirectory {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The Karmada Cluster CRD could not be written as YAML.
    #[error("serializing the Cluster CRD failed")]
    CrdYaml(#[source] serde_yaml::Error),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
