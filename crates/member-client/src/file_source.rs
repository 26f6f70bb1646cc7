//! A token file, such as the projected ServiceAccount token kubelet rotates in place, and
//! [`read_bounded`] for any file that must be small.

use std::{
    io::{self, Read as _},
    path::{Path, PathBuf},
    sync::Arc,
};

use async_trait::async_trait;

use crate::{Credential, CredentialKey, CredentialSource, SourceError};

/// Reads a bearer token (and optionally a CA bundle) from files.
///
/// This is how a process authenticates to its *own* cluster: kubelet writes a fresh projected
/// token to `/var/run/secrets/kubernetes.io/serviceaccount/token` before the old one expires,
/// so reading the file again is always enough to pick up a rotation. The [`CredentialKey`] passed to
/// [`fetch`](CredentialSource::fetch) is ignored; use [`FileSource::secret_ref`] as the cache key.
///
/// ```no_run
/// use member_client::file_source::FileSource;
/// let source = FileSource::new("/var/run/secrets/kubernetes.io/serviceaccount/token")
///     .with_ca_file("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
/// let key = source.secret_ref();
/// ```
#[derive(Clone, Debug)]
pub struct FileSource {
    token_path: PathBuf,
    ca_path: Option<PathBuf>,
}

impl FileSource {
    /// A source that reads the token from `token_path`.
    pub fn new(token_path: impl Into<PathBuf>) -> Self {
        Self {
            token_path: token_path.into(),
            ca_path: None,
        }
    }

    /// Also read a PEM CA bundle from `ca_path` on every fetch.
    #[must_use]
    pub fn with_ca_file(mut self, ca_path: impl Into<PathBuf>) -> Self {
        self.ca_path = Some(ca_path.into());
        self
    }

    /// The cache key for this file: no namespace, the token path as the name.
    pub fn secret_ref(&self) -> CredentialKey {
        CredentialKey::new("", self.token_path.display().to_string())
    }
}

#[async_trait]
impl CredentialSource for FileSource {
    async fn fetch(&self, _key: &CredentialKey) -> Result<Credential, SourceError> {
        let key = self.secret_ref();
        let token = read(&self.token_path, &key).await?;
        let credential = Credential::from_token_bytes(&token)?;
        match &self.ca_path {
            Some(ca_path) => Ok(credential.with_ca_bundle(read(ca_path, &key).await?)),
            None => Ok(credential),
        }
    }
}

async fn read(path: &PathBuf, key: &CredentialKey) -> Result<Vec<u8>, SourceError> {
    tokio::fs::read(path).await.map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => SourceError::NotFound {
            key: CredentialKey::new("", path.display().to_string()),
        },
        _ => SourceError::Read {
            key: key.clone(),
            source: Arc::new(err),
        },
    })
}

/// The content of the file at `path`, or `None` when it holds more than `limit` bytes.
///
/// At most `limit + 1` bytes are read, so a huge or endless file (`/dev/zero`, a FIFO kept
/// open) costs no more memory than a file at the limit.
///
/// # Errors
/// If the file cannot be opened or read.
pub fn read_bounded(path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let mut raw = Vec::new();
    std::fs::File::open(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut raw)?;
    Ok((u64::try_from(raw.len()).unwrap_or(u64::MAX) <= limit).then_some(raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[tokio::test]
    async fn reads_a_trimmed_token_and_picks_up_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let source = FileSource::new(&path);
        for token in ["first", "second"] {
            std::fs::write(&path, format!("{token}\n")).unwrap();
            let credential = source.fetch(&source.secret_ref()).await.unwrap();
            assert_eq!(credential.token().unwrap().expose_secret(), token);
        }
    }

    #[tokio::test]
    async fn a_missing_token_or_ca_file_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let no_token = FileSource::new(&path);
        std::fs::write(dir.path().join("token-too"), "t").unwrap();
        let no_ca =
            FileSource::new(dir.path().join("token-too")).with_ca_file(dir.path().join("ca.crt"));
        for source in [no_token, no_ca] {
            let err = source.fetch(&source.secret_ref()).await.unwrap_err();
            assert!(matches!(err, SourceError::NotFound { .. }), "{err:?}");
            assert!(!err.is_transient());
        }
    }

    #[tokio::test]
    async fn a_directory_is_a_transient_read_error() {
        let dir = tempfile::tempdir().unwrap();
        let source = FileSource::new(dir.path());
        let err = source.fetch(&source.secret_ref()).await.unwrap_err();
        assert!(err.is_transient(), "{err:?}");
    }

    #[test]
    fn a_file_at_the_limit_is_read_and_one_byte_more_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"1234").unwrap();
        assert_eq!(read_bounded(&path, 4).unwrap(), Some(b"1234".to_vec()));
        assert_eq!(read_bounded(&path, 3).unwrap(), None);
    }

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        assert_eq!(read_bounded(Path::new("/dev/zero"), 1 << 16).unwrap(), None);
    }

    #[test]
    fn a_missing_file_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_bounded(&dir.path().join("absent"), 4).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
