//! Member files: one YAML file per member in a directory, the token (and CA) in files beside
//! it. The way to run Tether without a control plane.
//!
//! ```yaml
//! # /etc/tether/members/member1.yaml
//! name: member1
//! apiEndpoint: https://10.0.0.1:6443
//! tokenFile: member1.token        # relative paths resolve beside this file
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

use std::{
    collections::BTreeMap,
    io,
    path::{Path, PathBuf},
    time::Duration,
};

use bytes::Bytes;
use member_client::{SecretRef, SourceError};
use serde::Deserialize;

use crate::{
    Error, InvalidReason, MemberDefinition, Result, karmada, member::checked_spec,
    secret_store::StoredSecret,
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

    /// The member definition of this file, read from `path`: relative `tokenFile` and `caFile`
    /// resolve beside it, and its [`secret_ref`](crate::MemberSpec::secret_ref) is
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
        members.push(read_member(path).await);
    }
    Ok(members)
}

async fn read_member(path: PathBuf) -> ScannedMember {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let invalid = |path: PathBuf, why: String| ScannedMember {
        definition: MemberDefinition {
            name: stem.clone(),
            spec: Err(InvalidReason::DefinitionInvalid(format!(
                "{}: {why}",
                path.display()
            ))),
        },
        path,
        secret: None,
    };
    let text = match tokio::fs::read_to_string(&path).await {
        Ok(text) => text,
        Err(err) => return invalid(path, format!("unreadable ({err})")),
    };
    let file = match MemberFile::parse(&text) {
        Ok(file) => file,
        Err(err) => return invalid(path, format!("not a member file ({err})")),
    };
    let definition = file.definition(&path);
    let beside = |p: &Path| path.parent().unwrap_or(Path::new("")).join(p);
    let secret = read_credential_files(
        &secret_ref_for(&path),
        &beside(&file.token_file),
        file.ca_file.as_deref().map(beside),
    )
    .await;
    ScannedMember {
        path,
        definition,
        secret,
    }
}

/// The token and CA files, parsed as a Karmada Secret with the same keys would be; `None`
/// when the token file is missing.
async fn read_credential_files(
    key: &SecretRef,
    token: &Path,
    ca: Option<PathBuf>,
) -> Option<StoredSecret> {
    let unreadable = |what: &str, path: &Path, err: io::Error| {
        StoredSecret::parsed(Err(SourceError::Invalid {
            key: key.clone(),
            reason: format!("{what} {}: unreadable ({err})", path.display()),
        }))
    };
    let mut data = BTreeMap::new();
    match tokio::fs::read(token).await {
        Ok(bytes) => data.insert(karmada::TOKEN_KEY.to_owned(), Bytes::from(bytes)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => return None,
        Err(err) => return Some(unreadable("tokenFile", token, err)),
    };
    if let Some(ca) = ca {
        match tokio::fs::read(&ca).await {
            Ok(bytes) => data.insert(karmada::CA_BUNDLE_KEY.to_owned(), Bytes::from(bytes)),
            Err(err) => return Some(unreadable("caFile", &ca, err)),
        };
    }
    Some(StoredSecret::parsed(karmada::credential(key, &data)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_ca::ca_pem;
    use rstest::rstest;
    use secrecy::ExposeSecret as _;

    #[rstest]
    #[case::minimal("name: m1\napiEndpoint: https://h:6443\ntokenFile: t\n", false, None)]
    #[case::every_field(
        "name: m1\napiEndpoint: https://h:6443\ntokenFile: t\ncaFile: ca.crt\n\
         insecureSkipTLSVerification: true\nproxyURL: http://p:3128\n",
        true,
        Some("http://p:3128")
    )]
    fn member_files_become_members(
        #[case] yaml: &str,
        #[case] insecure: bool,
        #[case] proxy: Option<&str>,
    ) {
        let path = Path::new("/etc/tether/members/m1.yaml");
        let def = MemberFile::parse(yaml).unwrap().definition(path);
        let want = crate::MemberSpec {
            name: "m1".into(),
            api_endpoint: "https://h:6443".into(),
            secret_ref: SecretRef::new("", "/etc/tether/members/m1.yaml"),
            insecure_skip_tls_verify: insecure,
            proxy_url: proxy.map(str::to_owned),
        };
        assert_eq!(def.spec, Ok(want));
    }

    #[rstest]
    #[case::not_yaml("{{{", "DefinitionInvalid")]
    #[case::no_name("apiEndpoint: https://h\ntokenFile: t\n", "DefinitionInvalid")]
    #[case::no_token_file("name: m1\napiEndpoint: https://h\n", "DefinitionInvalid")]
    #[case::typo(
        "name: m1\napiEndpoint: https://h\ntokenfile: t\n",
        "DefinitionInvalid"
    )]
    #[case::ftp_endpoint("name: m1\napiEndpoint: ftp://h\ntokenFile: t\n", "EndpointInvalid")]
    #[case::no_scheme("name: m1\napiEndpoint: h:6443\ntokenFile: t\n", "EndpointInvalid")]
    #[case::socks_proxy(
        "name: m1\napiEndpoint: https://h\ntokenFile: t\nproxyURL: socks5://p\n",
        "ProxyInvalid"
    )]
    #[tokio::test]
    async fn bad_member_files_are_invalid_members(#[case] yaml: &str, #[case] want: &str) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m1.yaml"), yaml).unwrap();
        std::fs::write(dir.path().join("t"), "tok").unwrap();
        let scanned = scan(dir.path()).await.unwrap();
        assert_eq!(scanned.len(), 1);
        let def = &scanned[0].definition;
        assert_eq!(
            def.name, "m1",
            "named after the file when the name is unreadable"
        );
        assert_eq!(def.spec.as_ref().unwrap_err().condition_reason(), want);
    }

    #[tokio::test]
    async fn relative_paths_resolve_beside_the_member_file() {
        let dir = tempfile::tempdir().unwrap();
        let ca = ca_pem();
        std::fs::create_dir(dir.path().join("creds")).unwrap();
        std::fs::write(dir.path().join("creds/t"), "tok\n").unwrap();
        std::fs::write(dir.path().join("creds/ca.crt"), &ca).unwrap();
        std::fs::write(
            dir.path().join("m1.yaml"),
            "name: m1\napiEndpoint: https://h\ntokenFile: creds/t\ncaFile: creds/ca.crt\n",
        )
        .unwrap();
        let scanned = scan(dir.path()).await.unwrap();
        let cred = scanned[0].secret.as_ref().unwrap().credential().unwrap();
        assert_eq!(cred.token().expose_secret(), "tok");
        assert_eq!(cred.ca_bundle().unwrap().as_ref(), ca.as_bytes());
    }

    #[tokio::test]
    async fn only_visible_yaml_files_are_member_files() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a.yaml", "b.yml", ".hidden.yaml", "c.txt", "t"] {
            std::fs::write(
                dir.path().join(name),
                "name: x\napiEndpoint: https://h\ntokenFile: t\n",
            )
            .unwrap();
        }
        std::fs::create_dir(dir.path().join("..data")).unwrap();
        let names: Vec<_> = scan(dir.path())
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.yaml", "b.yml"]);
    }

    #[rstest]
    // the token file
    #[case::missing_token(None, None, "NotFound")]
    #[case::empty_token(Some(&b""[..]), None, "EmptyToken")]
    #[case::non_utf8_token(Some(&[0xff, 0xfe][..]), None, "TokenNotUtf8")]
    // the CA file
    #[case::missing_ca(Some(&b"t"[..]), Some(None), "Invalid")]
    #[case::ca_not_pem(Some(&b"t"[..]), Some(Some(&b"garbage"[..])), "Invalid")]
    #[tokio::test]
    async fn bad_credential_files_are_typed_errors(
        #[case] token: Option<&[u8]>,
        #[case] ca: Option<Option<&[u8]>>,
        #[case] want: &str,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut yaml = "name: m1\napiEndpoint: https://h\ntokenFile: t\n".to_owned();
        if let Some(token) = token {
            std::fs::write(dir.path().join("t"), token).unwrap();
        }
        if let Some(ca) = ca {
            yaml.push_str("caFile: ca.crt\n");
            if let Some(ca) = ca {
                std::fs::write(dir.path().join("ca.crt"), ca).unwrap();
            }
        }
        std::fs::write(dir.path().join("m1.yaml"), yaml).unwrap();
        let scanned = scan(dir.path()).await.unwrap();
        let key = secret_ref_for(&scanned[0].path);
        let err = match &scanned[0].secret {
            None => SourceError::NotFound { key },
            Some(secret) => secret.credential().unwrap_err().clone(),
        };
        assert!(format!("{err:?}").starts_with(want), "{err:?}");
    }

    #[tokio::test]
    async fn a_missing_directory_is_an_error() {
        let err = scan(Path::new("/nonexistent/tether-members"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::ReadDirectory { .. }), "{err:?}");
    }
}
