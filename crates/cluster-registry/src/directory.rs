//! A directory of member files (the format is on [`DirectoryConfig`]).

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use bytes::Bytes;
use member_client::{CredentialKey, text::Text, validation};
use serde::Deserialize;

#[cfg(feature = "minting")]
use crate::minting::{MintBlock, MintRequest};
use crate::{
    Error, InvalidReason, MemberDefinition, MemberSpec, Origin, Result,
    bounded_file::{self, FileError},
    federation::{FEDERATED, Federation},
    member::checked_spec,
    secret_store::StoredSecret,
};

mod credential_files;
mod member_exec;

pub(crate) use member_exec::MemberExec;

/// Where the member files are and how often to look.
///
/// Member files: one YAML file per member in a directory, its credential in files beside it.
/// The way to run Tether without a control plane.
///
/// ```yaml
/// # /etc/tether/members/member1.yaml
/// name: member1
/// apiEndpoint: https://10.0.0.1:6443
/// # the credential: a token, a client certificate, or both ...
/// tokenFile: member1.token        # relative to this directory, and inside it
/// clientCertFile: member1.crt     # PEM chain, leaf first; needs clientKeyFile
/// clientKeyFile: member1.key      # PEM (PKCS#8, PKCS#1 or SEC1)
/// # ... or an exec plugin, as in a kubeconfig (it runs only as --exec-plugins declares it:
/// # these args and env must be ones its declaration accepts)
/// # exec:
/// #   apiVersion: client.authentication.k8s.io/v1
/// #   command: /usr/local/bin/cloud-auth
/// #   args: [token]
/// #   env: [{name: CLOUD_REGION, value: eu-1}]
/// #   provideClusterInfo: true    # the plugin is told apiEndpoint, the CA and proxyURL
/// # ... or `credential: federated` and no credential file: the control plane mints the
/// # member's token for its own audience (see the federation module)
/// caFile: member1-ca.crt          # optional, PEM; else the system roots
/// insecureSkipTLSVerification: false  # optional
/// proxyURL: http://proxy:3128     # optional
/// mint:                           # optional: Tether mints tokens into tokenFile
///   serviceAccount: tether-member/tether
/// ```
///
/// or, with everything in a kubeconfig (its current context, else its only one):
///
/// ```yaml
/// name: member2
/// kubeconfig: member2.kubeconfig  # read as a kubeconfig Secret's is: no file references
/// ```
///
/// A file names exactly one credential: `tokenFile`, `clientCertFile` + `clientKeyFile` (a
/// `tokenFile` may come with them, as a kubeconfig user may have both: both are sent), `exec`,
/// or `kubeconfig`. None, or `exec` with another, is
/// [`DefinitionInvalid`](crate::InvalidReason::DefinitionInvalid); half a certificate is
/// [`SecretInvalid`](crate::InvalidReason::SecretInvalid). `apiEndpoint` is required, except
/// with `kubeconfig`, which says the endpoint, CA, proxy, TLS server name and credential
/// itself: then `apiEndpoint`, `tokenFile`, `caFile`, `clientCertFile`, `clientKeyFile`,
/// `exec`, `proxyURL` and `insecureSkipTLSVerification: true` are `DefinitionInvalid`.
///
/// The directory is polled (every [`DirectoryConfig::poll_interval`], default 2 s): polling
/// works the same on every filesystem, inside containers and on ConfigMap/Secret volumes
/// (whose atomic `..data` symlink swaps inotify reports poorly), and at one `stat`-sized read
/// per file per poll it costs nothing that matters. Every `*.yaml`/`*.yml` file not starting
/// with `.` is a member file. A changed token, certificate, key, kubeconfig credential or exec
/// stanza is a [`CredentialsRotated`](crate::RegistryEvent::CredentialsRotated), a changed CA
/// file an [`Upserted`](crate::RegistryEvent::Upserted), a deleted token, certificate, key or
/// kubeconfig file [`SecretNotFound`](crate::InvalidReason::SecretNotFound).
///
/// A definition's author picks the files Tether reads, so every file it names is opened
/// relative to a descriptor of the directory with `openat2(RESOLVE_BENEATH)` (Linux 5.6+;
/// without it nothing is read): it must resolve beneath the directory (its `..data`
/// symlinks are fine; `..`, absolute paths, absolute symlinks and symlinks out are not), and
/// only regular files of at most 16 KiB (token), 1 MiB (CA, certificate chain, kubeconfig),
/// 64 KiB (key) and 64 KiB (member file) are read: anything else (a FIFO, a device) is
/// `SecretInvalid` (`DefinitionInvalid` for the member file) at once. A `mint:` block's
/// `tokenFile` must be a plain file name in the directory; each minted token replaces it
/// through the same descriptor (a new `0600` file with a random name, renamed over it).
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

/// One member file; the module docs say what each key means. Unknown keys are an error, so a
/// typo is not silently ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MemberFile {
    name: String,
    api_endpoint: Option<String>,
    token_file: Option<PathBuf>,
    client_cert_file: Option<PathBuf>,
    client_key_file: Option<PathBuf>,
    exec: Option<MemberExec>,
    kubeconfig: Option<PathBuf>,
    /// `federated`: the control plane mints the member's token ([`crate::federation`]).
    credential: Option<String>,
    ca_file: Option<PathBuf>,
    #[serde(rename = "insecureSkipTLSVerification", default)]
    insecure_skip_tls_verification: bool,
    #[serde(rename = "proxyURL", default)]
    proxy_url: Option<String>,
    /// `rotation:` is its former spelling, still read.
    #[cfg(feature = "minting")]
    #[serde(alias = "rotation")]
    mint: Option<MintBlock>,
    /// Without minting built in, a `mint:` block asks for what this build cannot do: it is
    /// read, so that the file stays valid, and left alone.
    #[cfg(not(feature = "minting"))]
    #[serde(alias = "rotation")]
    mint: Option<serde::de::IgnoredAny>,
}

/// Where a member file's connection settings and credential come from.
enum Layout<'a> {
    /// Its own keys, and the files they name.
    Direct { api_endpoint: &'a str },
    /// The kubeconfig at this path.
    Kubeconfig(&'a Path),
    /// Its own keys, and a credential the control plane mints: no credential file.
    Federated { api_endpoint: &'a str },
}

impl MemberFile {
    /// Where the member's settings come from, or why its keys do not define one member with
    /// one credential.
    fn layout(&self) -> Result<Layout<'_>, String> {
        if let Some(kubeconfig) = &self.kubeconfig {
            let given = given([
                ("apiEndpoint", self.api_endpoint.is_some()),
                ("tokenFile", self.token_file.is_some()),
                ("caFile", self.ca_file.is_some()),
                ("clientCertFile", self.client_cert_file.is_some()),
                ("clientKeyFile", self.client_key_file.is_some()),
                ("exec", self.exec.is_some()),
                ("proxyURL", self.proxy_url.is_some()),
                ("credential", self.credential.is_some()),
                (
                    "insecureSkipTLSVerification",
                    self.insecure_skip_tls_verification,
                ),
            ]);
            if !given.is_empty() {
                return Err(format!(
                    "with kubeconfig, {} must not be given: the kubeconfig says them",
                    given.join(", ")
                ));
            }
            return Ok(Layout::Kubeconfig(kubeconfig));
        }
        let api_endpoint = self
            .api_endpoint
            .as_deref()
            .ok_or("apiEndpoint is required unless kubeconfig is given")?;
        if let Some(credential) = &self.credential {
            return self.federated(credential, api_endpoint);
        }
        let files = self.token_file.is_some()
            || self.client_cert_file.is_some()
            || self.client_key_file.is_some();
        match (self.exec.is_some(), files) {
            (true, true) => Err(
                "exec and tokenFile, clientCertFile or clientKeyFile are both \
                                 given; choose one credential"
                    .to_owned(),
            ),
            (false, false) => Err("no credential: give tokenFile, clientCertFile and \
                                   clientKeyFile, exec, or kubeconfig"
                .to_owned()),
            _ => Ok(Layout::Direct { api_endpoint }),
        }
    }
}

impl MemberFile {
    /// A federated member's layout: it names no credential of its own.
    fn federated<'a>(&self, credential: &str, api_endpoint: &'a str) -> Result<Layout<'a>, String> {
        if credential != FEDERATED {
            return Err(format!(
                "credential is {:?}; the only value known is {FEDERATED:?}",
                Text::new(credential).as_str()
            ));
        }
        let given = given([
            ("tokenFile", self.token_file.is_some()),
            ("clientCertFile", self.client_cert_file.is_some()),
            ("clientKeyFile", self.client_key_file.is_some()),
            ("exec", self.exec.is_some()),
            ("mint", self.mint.is_some()),
        ]);
        if !given.is_empty() {
            return Err(format!(
                "a {FEDERATED} member's token is minted by the control plane: {} must not be \
                 given",
                given.join(", ")
            ));
        }
        Ok(Layout::Federated { api_endpoint })
    }
}

/// The keys of `keys` that the file gives.
fn given<const N: usize>(keys: [(&'static str, bool); N]) -> Vec<&'static str> {
    (keys.into_iter())
        .filter_map(|(key, given)| given.then_some(key))
        .collect()
}

/// The spec of a federated member file: its key is its name's, its CA the `caFile`.
fn federated_spec(
    dir: &Path,
    path: &Path,
    file: &MemberFile,
    api_endpoint: &str,
) -> std::result::Result<MemberSpec, InvalidReason> {
    let invalid = |why: String| {
        InvalidReason::DefinitionInvalid(Text::new(&format!("{}: {why}", path.display())).into())
    };
    let ca_bundle = match file.ca_file.as_deref() {
        None => None,
        Some(ca_file) => {
            let ca = bounded_file::read(dir, ca_file, bounded_file::CA_FILE_CAP).map_err(
                |err| match err {
                    FileError::NotFound => {
                        invalid(format!("caFile {} not found", ca_file.display()))
                    }
                    FileError::Refused(why) => {
                        invalid(format!("caFile {}: {why}", ca_file.display()))
                    }
                },
            )?;
            validation::ca_bundle(&ca)
                .map_err(|err| invalid(format!("caFile: {}", err.detail())))?;
            Some(Bytes::from(ca))
        }
    };
    let spec = checked_spec(
        file.name.clone(),
        api_endpoint.to_owned(),
        CredentialKey::federated(&file.name),
        file.insecure_skip_tls_verification,
        file.proxy_url.clone(),
    )?;
    Ok(MemberSpec {
        federation: Some(Federation::new(ca_bundle)),
        ..spec
    })
}

/// One member file as read by a poll.
#[derive(Debug)]
pub(crate) struct ScannedMember {
    pub(crate) path: PathBuf,
    pub(crate) definition: MemberDefinition,
    /// Its credential, parsed; `None` when a token, certificate, key or kubeconfig file is
    /// missing.
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

/// Reads one member file and the files it names, each through [`bounded_file::read`].
pub(crate) fn read_member_blocking(dir: &Path, path: PathBuf) -> ScannedMember {
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
    let file = match serde_yaml::from_str::<MemberFile>(&text) {
        Ok(file) => file,
        Err(err) => return invalid(path, format!("not a member file ({})", yaml_error(&err))),
    };
    let key = Origin::file_key(&path);
    let (spec, secret) = match file.layout() {
        Err(why) => (
            Err(InvalidReason::DefinitionInvalid(
                Text::new(&format!("{}: {why}", path.display())).into(),
            )),
            None,
        ),
        Ok(Layout::Direct { api_endpoint }) => {
            let spec = checked_spec(
                file.name.clone(),
                api_endpoint.to_owned(),
                key.clone(),
                file.insecure_skip_tls_verification,
                file.proxy_url.clone(),
            );
            #[cfg(feature = "minting")]
            let spec = spec.and_then(|mut spec| {
                spec.mint_request = mint_request(dir, &path, &file)?;
                Ok(spec)
            });
            (
                spec,
                credential_files::direct(dir, &key, &file, api_endpoint),
            )
        }
        Ok(Layout::Federated { api_endpoint }) => {
            (federated_spec(dir, &path, &file, api_endpoint), None)
        }
        Ok(Layout::Kubeconfig(kubeconfig)) => {
            let (spec, secret) = credential_files::kubeconfig(dir, &key, &file.name, kubeconfig);
            // Without a tokenFile there is nothing to write a minted token to.
            #[cfg(feature = "minting")]
            let spec = mint_request(dir, &path, &file).and(spec);
            (spec, secret)
        }
    };
    ScannedMember {
        path,
        definition: MemberDefinition {
            name: file.name.clone(),
            spec,
        },
        secret,
    }
}

/// The file's `mint:` request; it needs a `tokenFile` to replace, named by a plain file
/// name directly in the directory: the write-back replaces it through the directory's
/// descriptor ([`MembersDir::replace`](crate::members_dir::MembersDir)), never through a
/// subdirectory that could be swapped for a symlink.
#[cfg(feature = "minting")]
fn mint_request(
    dir: &Path,
    path: &Path,
    file: &MemberFile,
) -> std::result::Result<Option<Box<MintRequest>>, InvalidReason> {
    let Some(block) = &file.mint else {
        return Ok(None);
    };
    let plain = |p: &Path| {
        let mut components = p.components();
        matches!(
            (components.next(), components.next()),
            (Some(std::path::Component::Normal(_)), None)
        )
    };
    match &file.token_file {
        Some(token_file) if plain(token_file) => block
            .request(dir.join(token_file))
            .map(|r| Some(Box::new(r))),
        _ => rotation_without_token_file(path),
    }
}

fn rotation_without_token_file<T>(path: &Path) -> std::result::Result<T, InvalidReason> {
    Err(InvalidReason::DefinitionInvalid(format!(
        "{}: rotation needs a tokenFile directly in the directory (a plain file name) to write \
         each minted token to",
        path.display()
    )))
}

/// What serde_yaml says is wrong, unless it quotes a value: `exec.env` values may be secrets.
fn yaml_error(err: &serde_yaml::Error) -> String {
    let message = err.to_string();
    if !message.contains(['"', '\'']) {
        return message;
    }
    match err.location() {
        Some(at) => format!(
            "a value of the wrong type at line {} column {}",
            at.line(),
            at.column()
        ),
        None => "a value of the wrong type".to_owned(),
    }
}

#[cfg(test)]
mod tests;
