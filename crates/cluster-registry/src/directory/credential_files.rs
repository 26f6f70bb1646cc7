//! The files a member file names, read into the member's credential.

use std::path::Path;

use bytes::Bytes;
use member_client::{
    CredentialKey, SourceError, client_identity::ClientIdentity, exec::ExecCluster, text::Text,
    validation,
};
use secrecy::{ExposeSecret as _, SecretSlice};

use super::MemberFile;
use crate::{
    InvalidReason, MemberSpec,
    bounded_file::{self, FileError},
    kubeconfig,
    secret_store::StoredSecret,
    stored_credential::{Material, StoredCredential},
};

/// The most a certificate chain file may hold: what member-client accepts.
const CERT_FILE_CAP: u64 = ClientIdentity::MAX_CHAIN_BYTES as u64;
/// The most a private key file may hold: what member-client accepts.
const KEY_FILE_CAP: u64 = ClientIdentity::MAX_KEY_BYTES as u64;

/// Why no credential was made.
enum Unread {
    /// A token, certificate, key or kubeconfig file does not exist (yet): like a Secret not
    /// created yet, the member is `SecretNotFound` until it appears.
    Missing,
    /// What is there is unusable.
    Invalid(SourceError),
}

impl From<SourceError> for Unread {
    fn from(err: SourceError) -> Self {
        Self::Invalid(err)
    }
}

/// The credential of a member file without `kubeconfig`: its token, certificate and key, CA
/// and exec plugin, stored under `key`; `None` when a token, certificate or key file is
/// missing.
pub(super) fn direct(
    dir: &Path,
    key: &CredentialKey,
    file: &MemberFile,
    api_endpoint: &str,
) -> Option<StoredSecret> {
    match direct_credential(dir, key, file, api_endpoint) {
        Ok(credential) => Some(StoredSecret::parsed(Ok::<_, SourceError>(credential))),
        Err(Unread::Missing) => None,
        Err(Unread::Invalid(err)) => Some(StoredSecret::parsed(Err::<StoredCredential, _>(err))),
    }
}

fn direct_credential(
    dir: &Path,
    key: &CredentialKey,
    file: &MemberFile,
    api_endpoint: &str,
) -> Result<StoredCredential, Unread> {
    let read = |what: &str, path: &Path, cap: u64| -> Result<Vec<u8>, Unread> {
        match bounded_file::read(dir, path, cap) {
            Ok(bytes) => Ok(bytes),
            Err(FileError::NotFound) => Err(Unread::Missing),
            Err(FileError::Refused(why)) => Err(refused(key, what, path, &why).into()),
        }
    };
    let token = (file.token_file.as_deref())
        .map(|path| read("tokenFile", path, bounded_file::TOKEN_FILE_CAP))
        .transpose()?;
    let cert = (file.client_cert_file.as_deref())
        .map(|path| read("clientCertFile", path, CERT_FILE_CAP))
        .transpose()?;
    // Zeroed on drop: it is a private key.
    let client_key = (file.client_key_file.as_deref())
        .map(|path| read("clientKeyFile", path, KEY_FILE_CAP))
        .transpose()?
        .map(SecretSlice::from);
    let ca_bundle = match file.ca_file.as_deref() {
        None => None,
        Some(path) => {
            let ca = match read("caFile", path, bounded_file::CA_FILE_CAP) {
                // A CA that is named but missing is a mistake, not a credential not written yet.
                Err(Unread::Missing) => {
                    return Err(refused(key, "caFile", path, "not found").into());
                }
                read => read?,
            };
            // An empty CA file means none, as an empty Karmada `caBundle` does.
            if ca.is_empty() {
                None
            } else {
                validation::ca_bundle(&ca)
                    .map_err(|err| refused(key, "caFile", path, err.detail()))?;
                Some(Bytes::from(ca))
            }
        }
    };
    let exec = (file.exec.as_ref())
        .map(|exec| {
            let cluster = ExecCluster {
                certificate_authority_data: ca_bundle.as_ref().map(|ca| ca.to_vec()),
                insecure_skip_tls_verify: file.insecure_skip_tls_verification,
                proxy_url: file.proxy_url.clone().filter(|p| !p.trim().is_empty()),
                ..ExecCluster::new(api_endpoint)
            };
            exec.config(key, cluster)
        })
        .transpose()?;
    Ok(Material {
        token: token.as_deref(),
        client_certificate_pem: cert.as_deref(),
        client_key_pem: client_key.as_ref().map(|k| k.expose_secret()),
        exec,
        ca_bundle,
    }
    .stored(key)?)
}

/// The spec and credential of the member `name` whose file names the kubeconfig at `path`.
/// A missing kubeconfig is `SecretNotFound`; one that is refused or does not parse is
/// `SecretInvalid`, in the spec (it holds the endpoint) and in the store.
pub(super) fn kubeconfig(
    dir: &Path,
    key: &CredentialKey,
    name: &str,
    path: &Path,
) -> (Result<MemberSpec, InvalidReason>, Option<StoredSecret>) {
    let unusable = |err: SourceError| {
        (
            Err(InvalidReason::from(&err)),
            Some(StoredSecret::parsed(Err::<StoredCredential, _>(err))),
        )
    };
    let cap = kubeconfig::MAX_KUBECONFIG_BYTES as u64;
    let raw = match bounded_file::read(dir, path, cap) {
        Ok(raw) => raw,
        Err(FileError::NotFound) => return (Err(InvalidReason::SecretNotFound), None),
        Err(FileError::Refused(why)) => return unusable(refused(key, "kubeconfig", path, &why)),
    };
    match kubeconfig::parse(key, &raw) {
        Ok(member) => (
            member.spec(name.to_owned(), key.clone()),
            Some(StoredSecret::parsed(member.credential)),
        ),
        Err(err) => unusable(err),
    }
}

fn refused(key: &CredentialKey, what: &str, path: &Path, why: &str) -> SourceError {
    SourceError::Invalid {
        key: key.clone(),
        reason: Text::new(&format!("{what} {}: {why}", path.display())).into(),
    }
}
