//! Member files, read from temporary directories.

mod credential_kinds;
mod kubeconfig_files;
mod rotation;

use super::*;
use crate::{stored_credential::StoredCredential, test_ca::ca_pem};
use member_client::SourceError;
use rstest::rstest;
use secrecy::ExposeSecret as _;

/// A members directory in a temp dir.
struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    fn write(&self, name: &str, content: impl AsRef<[u8]>) -> &Self {
        std::fs::write(self.path(name), content).unwrap();
        self
    }

    /// `m1.yaml` holding `yaml`, read as a poll reads it.
    fn member(&self, yaml: &str) -> ScannedMember {
        self.write("m1.yaml", yaml);
        read_member_blocking(self.0.path(), self.path("m1.yaml"))
    }

    /// Where `m1.yaml`'s credential is stored.
    fn key(&self) -> CredentialKey {
        secret_ref_for(&self.path("m1.yaml"))
    }
}

impl ScannedMember {
    /// Why the definition is unusable; panics if it is usable.
    fn refused(&self) -> &InvalidReason {
        self.definition.spec.as_ref().unwrap_err()
    }

    /// The credential as stored; panics if a credential file is missing.
    fn stored(&self) -> Result<&StoredCredential, &SourceError> {
        self.secret.as_ref().expect("a credential").stored()
    }
}

#[rstest]
#[case::minimal("name: m1\napiEndpoint: https://h:6443\ntokenFile: t\n", false, None)]
#[case::every_field(
    "name: m1\napiEndpoint: https://h:6443\ntokenFile: t\ncaFile: ca.crt\n\
     insecureSkipTLSVerification: true\nproxyURL: http://p:3128\n",
    true,
    Some("http://p:3128")
)]
#[tokio::test]
async fn member_files_become_members(
    #[case] yaml: &str,
    #[case] insecure: bool,
    #[case] proxy: Option<&str>,
) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m1.yaml"), yaml).unwrap();
    std::fs::write(dir.path().join("t"), "tok").unwrap();
    std::fs::write(dir.path().join("ca.crt"), ca_pem()).unwrap();
    let scanned = scan(dir.path()).await.unwrap();
    let want = crate::MemberSpec {
        name: "m1".into(),
        api_endpoint: "https://h:6443".into(),
        secret_ref: secret_ref_for(&dir.path().join("m1.yaml")),
        insecure_skip_tls_verify: insecure,
        proxy_url: proxy.map(str::to_owned),
        tls_server_name: None,
        mint_request: None,
    };
    assert_eq!(scanned[0].definition.spec, Ok(want));
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
    assert_eq!(cred.token().unwrap().expose_secret(), "tok");
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

/// What a member whose `tokenFile` is `token` (set up by `prepare`) ends up as.
async fn credential_of(token: &str, prepare: impl FnOnce(&Path)) -> String {
    let dir = tempfile::tempdir().unwrap();
    prepare(dir.path());
    let yaml = format!("name: m1\napiEndpoint: https://h\ntokenFile: {token:?}\n");
    std::fs::write(dir.path().join("m1.yaml"), yaml).unwrap();
    let scanned = tokio::time::timeout(std::time::Duration::from_secs(2), scan(dir.path()))
        .await
        .expect("a hostile token file must not block the poll")
        .unwrap();
    match scanned[0].secret.as_ref().map(StoredSecret::credential) {
        None => "NotFound".to_owned(),
        Some(Ok(_)) => "Ok".to_owned(),
        Some(Err(err)) => err.to_string(),
    }
}

#[tokio::test]
async fn hostile_token_files_are_secret_invalid_at_once() {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("t"), "someone else's").unwrap();
    let outside_token = outside.path().join("t");
    let fifo = |dir: &Path| {
        let mode = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.join("t"),
            rustix::fs::FileType::Fifo,
            mode,
            0,
        )
        .unwrap();
    };
    type Prepare = Box<dyn FnOnce(&Path)>;
    let cases: Vec<(&str, Prepare, &str)> = vec![
        (
            "t",
            Box::new(|d: &Path| std::fs::write(d.join("t"), "tok").unwrap()),
            "Ok",
        ),
        ("t", Box::new(fifo), "not a regular file"),
        (
            "t",
            Box::new(|d: &Path| symlink("/dev/zero", d.join("t")).unwrap()),
            "leads out",
        ),
        (
            "t",
            Box::new(move |d: &Path| symlink(&outside_token, d.join("t")).unwrap()),
            "leads out",
        ),
        (
            "t",
            Box::new(|d: &Path| std::fs::write(d.join("t"), vec![b'a'; 16 * 1024 + 1]).unwrap()),
            "larger than 16384",
        ),
        ("../t", Box::new(|_: &Path| {}), "'..'"),
        ("/etc/hostname", Box::new(|_: &Path| {}), "absolute path"),
    ];
    for (token, prepare, want) in cases {
        let got = credential_of(token, prepare).await;
        assert!(got.contains(want), "{token}: {got}");
    }
}

#[tokio::test]
async fn an_oversized_member_file_is_definition_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = "name: m1\napiEndpoint: https://h\ntokenFile: t\n".to_owned();
    yaml.push_str(&format!("# {}\n", "x".repeat(64 * 1024)));
    std::fs::write(dir.path().join("m1.yaml"), yaml).unwrap();
    let scanned = scan(dir.path()).await.unwrap();
    let reason = scanned[0].definition.spec.as_ref().unwrap_err().to_string();
    assert!(
        reason.starts_with("DefinitionInvalid") && reason.contains("larger than"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_missing_directory_is_an_error() {
    let err = scan(Path::new("/nonexistent/tether-members"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ReadDirectory { .. }), "{err:?}");
}
