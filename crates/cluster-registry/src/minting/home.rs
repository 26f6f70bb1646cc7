//! [`TokenHome`]: where a member's token is read from and written back to, so that Karmada,
//! Argo CD and anything else reading that place get each new token too.
//!
//! Every write is conditional: a Secret is replaced with the `resourceVersion` it was read
//! at, a token file only while it still holds the token it was read with. A write that lost
//! a race is [`HomeError::Conflict`], and nothing is overwritten.

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
};

use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{Api, Client, ResourceExt as _, api::PostParams};
use member_client::{CredentialKey, text::Text};
use secrecy::{ExposeSecret as _, SecretSlice, SecretString};

use super::record::{MintRecord, RECORD_ANNOTATION};
use crate::{bounded_file::FileError, members_dir::MembersDir};

/// The Karmada format's token key (`karmada::TOKEN_KEY`) and the Argo CD format's config key
/// (`argocd::CONFIG_KEY`), named here too: minting writes to those Secrets in a build without
/// their sources.
const TOKEN_KEY: &str = "token";
const CONFIG_KEY: &str = "config";

/// The most of a token file (or its record) read: a service account token is about 1 KiB.
const MAX_FILE_LEN: u64 = 64 * 1024;

/// Where a member's token lives.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenHome {
    /// A Karmada member Secret: the key `token`.
    KarmadaSecret(CredentialKey),
    /// An Argo CD cluster Secret: `bearerToken` in the `config` JSON.
    ArgoCdSecret(CredentialKey),
    /// A member file's token file; the record is kept in a hidden file beside it.
    File(PathBuf),
}

/// Why a token could not be read or written.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum HomeError {
    /// It changed since it was read: someone else wrote first.
    #[error("it changed since it was read")]
    Conflict,
    /// The Secret or file is gone.
    #[error("{0} does not exist")]
    NotFound(String),
    /// The control plane refused (403): the collector may not read or update the Secret.
    #[error("the control plane refused: {0}")]
    Forbidden(Text),
    /// What is there cannot hold a token (an Argo CD `config` that is not a JSON object).
    #[error("{0}")]
    Invalid(String),
    /// The control plane or the filesystem failed.
    #[error("{0}")]
    Failed(Text),
}

/// A token home as it was read: the token, the record, and what a conditional write needs.
#[derive(Clone)]
pub struct HomeSnapshot {
    /// The token there now (`None`: none yet).
    pub token: Option<SecretString>,
    /// The record of the last mint.
    pub record: MintRecord,
    secret: Option<Secret>,
}

impl fmt::Debug for HomeSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HomeSnapshot")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for TokenHome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::KarmadaSecret(secret) => write!(f, "Secret {secret} key {TOKEN_KEY}"),
            Self::ArgoCdSecret(secret) => write!(f, "Secret {secret} config.bearerToken"),
            Self::File(path) => write!(f, "file {}", path.display()),
        }
    }
}

impl TokenHome {
    /// Reads the token and the record, a Secret through `control_plane`.
    ///
    /// # Errors
    /// [`HomeError`] when it cannot be read.
    pub async fn read(&self, control_plane: Option<&Client>) -> Result<HomeSnapshot, HomeError> {
        match self {
            Self::KarmadaSecret(secret) | Self::ArgoCdSecret(secret) => {
                let object = secrets(control_plane, secret)?
                    .get(&secret.name)
                    .await
                    .map_err(|err| api_error(err, secret))?;
                let data = object.data.clone().unwrap_or_default();
                let token = match self {
                    Self::ArgoCdSecret(_) => argocd_token(&data)?,
                    _ => data.get(TOKEN_KEY).and_then(|t| token_text(&t.0)),
                };
                let record = (object.annotations().get(RECORD_ANNOTATION))
                    .map(|text| MintRecord::parse(text))
                    .unwrap_or_default();
                Ok(HomeSnapshot {
                    token,
                    record,
                    secret: Some(object),
                })
            }
            Self::File(path) => {
                let token = read_file(path).await?.and_then(|raw| token_text(&raw));
                let record = read_file(&record_path(path))
                    .await?
                    .map(|raw| MintRecord::parse(&String::from_utf8_lossy(&raw)))
                    .unwrap_or_default();
                Ok(HomeSnapshot {
                    token,
                    record,
                    secret: None,
                })
            }
        }
    }

    /// Writes `record`, and `token` when given, if the home is still as `base` read it;
    /// returns the home as written.
    ///
    /// # Errors
    /// [`HomeError::Conflict`] if it changed since `base`; [`HomeError`] otherwise.
    pub async fn write(
        &self,
        control_plane: Option<&Client>,
        base: &HomeSnapshot,
        token: Option<&SecretString>,
        record: &MintRecord,
    ) -> Result<HomeSnapshot, HomeError> {
        let secret = match self {
            Self::KarmadaSecret(secret) | Self::ArgoCdSecret(secret) => {
                let mut object = base
                    .secret
                    .clone()
                    .ok_or_else(|| HomeError::Invalid("not read as a Secret".to_owned()))?;
                let data = object.data.get_or_insert_with(BTreeMap::new);
                if let Some(token) = token {
                    match self {
                        Self::ArgoCdSecret(_) => set_argocd_token(data, token)?,
                        _ => {
                            data.insert(
                                TOKEN_KEY.to_owned(),
                                ByteString(token.expose_secret().as_bytes().to_vec()),
                            );
                        }
                    }
                }
                (object.annotations_mut()).insert(RECORD_ANNOTATION.to_owned(), record.to_json());
                // `replace` sends the resourceVersion it was read at: a 409 if it moved.
                let written = secrets(control_plane, secret)?
                    .replace(&secret.name, &PostParams::default(), &object)
                    .await
                    .map_err(|err| api_error(err, secret))?;
                Some(written)
            }
            Self::File(path) => {
                let now = read_file(path).await?.and_then(|raw| token_text(&raw));
                if now.as_ref().map(SecretString::expose_secret)
                    != base.token.as_ref().map(SecretString::expose_secret)
                {
                    return Err(HomeError::Conflict);
                }
                // The record first: a token written without its record would be minted again.
                replace_file(&record_path(path), record.to_json().as_bytes()).await?;
                if let Some(token) = token {
                    replace_file(path, token.expose_secret().as_bytes()).await?;
                }
                None
            }
        };
        Ok(HomeSnapshot {
            token: token.cloned().or_else(|| base.token.clone()),
            record: record.clone(),
            secret,
        })
    }
}

fn secrets(client: Option<&Client>, secret: &CredentialKey) -> Result<Api<Secret>, HomeError> {
    let client = client.ok_or_else(|| {
        HomeError::Invalid(format!(
            "Secret {secret} lives in a control plane and the collector has no client for it"
        ))
    })?;
    Ok(Api::namespaced(client.clone(), &secret.namespace))
}

fn api_error(err: kube::Error, secret: &CredentialKey) -> HomeError {
    match &err {
        kube::Error::Api(status) if status.code == 409 => HomeError::Conflict,
        kube::Error::Api(status) if status.code == 404 => {
            HomeError::NotFound(format!("Secret {secret}"))
        }
        kube::Error::Api(status) if status.code == 403 => {
            HomeError::Forbidden(Text::new(&status.message))
        }
        other => HomeError::Failed(Text::new(&other.to_string())),
    }
}

/// A token as stored: trimmed, UTF-8, not empty.
fn token_text(raw: &[u8]) -> Option<SecretString> {
    let text = std::str::from_utf8(raw).ok()?.trim();
    (!text.is_empty()).then(|| SecretString::from(text.to_owned()))
}

fn argocd_config(
    data: &BTreeMap<String, ByteString>,
) -> Result<serde_json::Map<String, serde_json::Value>, HomeError> {
    let Some(raw) = data.get(CONFIG_KEY) else {
        return Ok(serde_json::Map::new());
    };
    match serde_json::from_slice::<serde_json::Value>(&raw.0) {
        Ok(serde_json::Value::Object(config)) => Ok(config),
        _ => Err(HomeError::Invalid(
            "the Secret's config is not a JSON object".to_owned(),
        )),
    }
}

fn argocd_token(data: &BTreeMap<String, ByteString>) -> Result<Option<SecretString>, HomeError> {
    Ok(argocd_config(data)?
        .get("bearerToken")
        .and_then(serde_json::Value::as_str)
        .and_then(|token| token_text(token.as_bytes())))
}

/// Sets `bearerToken` and keeps every other field of `config` as it was.
fn set_argocd_token(
    data: &mut BTreeMap<String, ByteString>,
    token: &SecretString,
) -> Result<(), HomeError> {
    let mut config = argocd_config(data)?;
    config.insert(
        "bearerToken".to_owned(),
        serde_json::Value::String(token.expose_secret().to_owned()),
    );
    let json = serde_json::to_vec(&config).map_err(|err| HomeError::Invalid(err.to_string()))?;
    data.insert(CONFIG_KEY.to_owned(), ByteString(json));
    Ok(())
}

/// `.<token file>.rotation` beside the token file: hidden, and not a member file.
fn record_path(token_file: &Path) -> PathBuf {
    let name = token_file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    token_file.with_file_name(format!(".{name}.rotation"))
}

/// Reads a token file or its record through the members directory's opener: a file that
/// is not a regular file beneath the directory (a symlink out, a FIFO) is refused.
async fn read_file(path: &Path) -> Result<Option<Vec<u8>>, HomeError> {
    let (dir, name) = in_members_dir(path)?;
    match blocking(move || MembersDir::open(&dir)?.read(&name, MAX_FILE_LEN)).await? {
        Ok(raw) => Ok(Some(raw)),
        Err(FileError::NotFound) => Ok(None),
        Err(FileError::Refused(why)) => Err(HomeError::Invalid(
            Text::new(&format!("{}: {why}", path.display())).into(),
        )),
    }
}

/// Replaces `path` atomically through the members directory's opener: readers see the old
/// content or the new, and a symlink there is replaced, never written through.
async fn replace_file(path: &Path, content: &[u8]) -> Result<(), HomeError> {
    let (dir, name) = in_members_dir(path)?;
    // Zeroed on drop: it is a token.
    let content = SecretSlice::from(content.to_vec());
    match blocking(move || MembersDir::open(&dir)?.replace(&name, content.expose_secret())).await? {
        Ok(()) => Ok(()),
        Err(FileError::NotFound) => Err(HomeError::NotFound(path.display().to_string())),
        Err(FileError::Refused(why)) => Err(HomeError::Failed(Text::new(&format!(
            "{}: {why}",
            path.display()
        )))),
    }
}

/// The members directory and the file's name in it. A member file's `rotation:` names a
/// plain file name as `tokenFile`, so the token file's parent is the directory itself.
fn in_members_dir(path: &Path) -> Result<(PathBuf, PathBuf), HomeError> {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Ok((dir.to_owned(), PathBuf::from(name))),
        _ => Err(HomeError::Invalid(format!(
            "{}: not a file in a members directory",
            path.display()
        ))),
    }
}

/// Runs file I/O off the async workers.
async fn blocking<T: Send + 'static>(
    io: impl FnOnce() -> T + Send + 'static,
) -> Result<T, HomeError> {
    tokio::task::spawn_blocking(io)
        .await
        .map_err(|_| HomeError::Failed(Text::new("the file I/O task stopped")))
}

#[cfg(test)]
mod tests;
