//! Member files: one YAML file per member in a directory, the token (and CA) in files beside
//! it. The way to run Tether without a control plane.
//!
//! ```yaml
//! # /etc/tether/members/member1.yaml
//! name: member1
//! apiEndpoint: https://10.0.0.1:6443
//! tokenFile: member1.token        # relative to this directory, and inside it
//! caFile: member1-ca.crt          # optional, PEM
//! insecureSkipTLSVerification: false  # optional
//! proxyURL: http://proxy:3128     # optional
//! ```
//!
//! The directory is polled (every [`DirectoryConfig::poll_interval`], default 2 s): polling
//! works the same on every filesystem, inside containers and on ConfigMap/Secret volumes
//! (whose atomic `..data` symlink swaps inotify reports poorly), and at one `stat`-sized read
//! per file per poll it costs nothing that matters. Every `*.yaml`/`*.yml` file not starting
//! with `.` is a member file. A changed token file is a
//! [`CredentialsRotated`](crate::RegistryEvent::CredentialsRotated), a changed CA file an
//! [`Upserted`](crate::RegistryEvent::Upserted), a deleted token file
//! [`SecretNotFound`](crate::InvalidReason::SecretNotFound).
//!
//! A definition's author picks the files Tether reads, so `tokenFile` and `caFile` must
//! resolve inside the directory (its `..data` symlinks are fine; `..`, absolute paths and
//! symlinks out are not), and only regular files of at most 16 KiB (token), 1 MiB (CA) and
//! 64 KiB (member file) are read: anything else is `SecretInvalid` (`DefinitionInvalid` for
//! the member file) at once.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use bytes::Bytes;
use member_client::{SecretRef, SourceError, Text};
use serde::Deserialize;

use crate::{
    Error, InvalidReason, MemberDefinition, Result,
    bounded_file::{self, FileError},
    karmada,
    member::checked_spec,
    secret_store::StoredSecret,
    stored_credential::StoredCredential,
};

/// Where the member files are and how often to look.
#[derive(Clone, Debug)]
pub struct DirectoryConfig {
    /// The directory holding the member files.
    pub path: PathBuf,
    /// How often it is read again. Default: 2 s.
    pub poll_interval: Duration,
}

impl DirectoryConfig {
    /// Member files in `path`, polled every 2 s.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            poll_interval: Duration::from_secs(2),
        }
    }

    /// Poll every `interval` instead.
    #[must_use]
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }
}

/// One member file.
///
/// ```
/// use cluster_registry::directory::MemberFile;
/// let file = MemberFile::parse("name: m1\napiEndpoint: https://10.0.0.1:6443\ntokenFile: m1.token\n")?;
/// assert_eq!(file.token_file.to_str(), Some("m1.token"));
/// # Ok::<_, serde_yaml::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberFile {
    /// The member's name.
    pub name: String,
    /// The member apiserver's URL, `https://host[:port]`.
    pub api_endpoint: String,
    /// The file holding the bearer token.
    pub token_file: PathBuf,
    /// The file holding the PEM CA bundle; the system roots are used without one.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Skip verifying the member's serving certificate.
    #[serde(rename = "insecureSkipTLSVerification", default)]
    pub insecure_skip_tls_verification: bool,
    /// An `http://` or `https://` proxy.
    #[serde(rename = "proxyURL", default)]
    pub proxy_url: Option<String>,
}

impl MemberFile {
    /// Parses a member file. Unknown keys are an error, so a typo is not silently ignored.
    ///
    /// # Errors
    /// If `yaml` is not a member file.
    pub fn parse(yaml: &str) -> Result<Self, serde_yaml::Error> {
        serde_yaml::from_str(yaml)
    }

    /// The member definition of this file, read from `path` (its `tokenFile` and `caFile`
    /// resolve inside the directory holding it), and its [`secret_ref`](crate::MemberSpec::secret_ref) is
    /// [`secret_ref_for(path)`](secret_ref_for).
    pub fn definition(&self, path: &Path) -> MemberDefinition {
        MemberDefinition {
            name: self.name.clone(),
            spec: checked_spec(
                self.name.clone(),
                self.api_endpoint.clone(),
                secret_ref_for(path),
                self.insecure_skip_tls_verification,
                self.proxy_url.clone(),
            ),
        }
    }
}

/// The [`SecretRef`] of the member defined by the file at `path`: no namespace, the path as
/// the name.
pub fn secret_ref_for(path: &Path) -> SecretRef {
    SecretRef::new("", path.display().to_string())
}

/// One member file as read by a poll.
#[derive(Debug)]
pub(crate) struct ScannedMember {
    pub(crate) path: PathBuf,
    pub(crate) definition: MemberDefinition,
    /// Its token and CA, parsed; `None` when the token file is missing.
    pub(crate) secret: Option<StoredSecret>,
}

/// Reads every member file in `dir`, sorted by path.
///
/// # Errors
/// [`Error::ReadDirectory`] if `dir` cannot be listed. A member file that cannot be read or
/// parsed is not an error: it is a [`DefinitionInvalid`](InvalidReason::DefinitionInvalid)
/// member named after the file.
pub(crate) async fn scan(dir: &Path) -> Result<Vec<ScannedMember>> {
    let read_dir_err = |source| Error::ReadDirectory {
        path: dir.to_owned(),
        source,
    };
    let mut entries = tokio::fs::read_dir(dir).await.map_err(read_dir_err)?;
    let mut paths = Vec::new();
    while let Some(entry) = entries.next_entry().await.map_err(read_dir_err)? {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with('.') && (name.ends_with(".yaml") || name.ends_with(".yml")) {
            paths.push(path);
        }
    }
    paths.sort();
    let mut members = Vec::with_capacity(paths.len());
    for path in paths {
        members.push(read_member(dir, path).await);
    }
    Ok(members)
}

async fn read_member(dir: &Path, path: PathBuf) -> ScannedMember {
    let dir = dir.to_owned();
    let read = tokio::task::spawn_blocking(move || read_member_blocking(&dir, path));
    match read.await {
        Ok(member) => member,
        // Only a panic ends the blocking read early, and the reads do not panic.
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

/// Reads one member file and its credential files, each through [`bounded_file::read`].
fn read_member_blocking(dir: &Path, path: PathBuf) -> ScannedMember {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let invalid = |path: PathBuf, why: String| ScannedMember {
        definition: MemberDefinition {
            name: stem.clone(),
            spec: Err(InvalidReason::DefinitionInvalid(
                Text::new(&format!("{}: {why}", path.display())).into(),
            )),
        },
        path,
        secret: None,
    };
    let text = match bounded_file::read(dir, &path, bounded_file::MEMBER_FILE_CAP) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(FileError::NotFound) => return invalid(path, "vanished while being read".into()),
        Err(FileError::Refused(why)) => return invalid(path, why),
    };
    let file = match MemberFile::parse(&text) {
        Ok(file) => file,
        Err(err) => return invalid(path, format!("not a member file ({err})")),
    };
    let definition = file.definition(&path);
    let secret = read_credential_files(
        dir,
        &secret_ref_for(&path),
        &file.token_file,
        file.ca_file.as_deref(),
    );
    ScannedMember {
        path,
        definition,
        secret,
    }
}

/// The token and CA files, parsed as a Karmada Secret with the same keys would be; `None`
/// when the token file is missing.
fn read_credential_files(
    dir: &Path,
    key: &SecretRef,
    token: &Path,
    ca: Option<&Path>,
) -> Option<StoredSecret> {
    let refused = |what: &str, path: &Path, why: String| {
        StoredSecret::parsed(Err::<StoredCredential, _>(SourceError::Invalid {
            key: key.clone(),
            reason: Text::new(&format!("{what} {}: {why}", path.display())).into(),
        }))
    };
    let mut data = BTreeMap::new();
    match bounded_file::read(dir, token, bounded_file::TOKEN_FILE_CAP) {
        Ok(bytes) => data.insert(karmada::TOKEN_KEY.to_owned(), Bytes::from(bytes)),
        Err(FileError::NotFound) => return None,
        Err(FileError::Refused(why)) => return Some(refused("tokenFile", token, why)),
    };
    if let Some(ca) = ca {
        match bounded_file::read(dir, ca, bounded_file::CA_FILE_CAP) {
            Ok(bytes) => data.insert(karmada::CA_BUNDLE_KEY.to_owned(), Bytes::from(bytes)),
            Err(FileError::NotFound) => return Some(refused("caFile", ca, "not found".into())),
            Err(FileError::Refused(why)) => return Some(refused("caFile", ca, why)),
        };
    }
    Some(StoredSecret::parsed(karmada::credential(key, &data)))
}

#[cfg(test)]
mod tests;
