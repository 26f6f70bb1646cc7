//! Member files, read from temporary directories.

mod credential_kinds;
mod kubeconfig_files;
mod rotation;

use super::*;
use crate::{stored_credential::StoredCredential, test_ca::ca_pem};
use member_client::CredentialKey;
use member_client::{SourceError, validation::MemberEndpoint};
use rstest::rstest;
use secrecy::ExposeSecret as _;
use std::os::unix::fs::symlink;

use crate::members_dir::tests::fifo;

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
        Origin::file_key(&self.path("m1.yaml"))
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

/// `m1.yaml`'s lines when its token file is `t`.
const MEMBER: &str = "name: m1\napiEndpoint: https://h\ntokenFile: t\n";

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
    let dir = Dir::new();
    dir.write("t", "tok").write("ca.crt", ca_pem());
    let want = crate::MemberSpec {
        name: "m1".into(),
        endpoint: MemberEndpoint {
            url: "https://h:6443".into(),
            insecure_skip_tls_verify: insecure,
            proxy_url: proxy.map(str::to_owned),
            tls_server_name: None,
        },
        secret_ref: dir.key(),
        federation: None,
        mint_request: None,
    };
    assert_eq!(dir.member(yaml).definition.spec, Ok(want));
}

#[rstest]
#[case::not_yaml("{{{", "DefinitionInvalid", "")]
#[case::no_name("apiEndpoint: https://h\ntokenFile: t\n", "DefinitionInvalid", "")]
#[case::no_token_file("name: m1\napiEndpoint: https://h\n", "DefinitionInvalid", "")]
#[case::typo(
    "name: m1\napiEndpoint: https://h\ntokenfile: t\n",
    "DefinitionInvalid",
    ""
)]
#[case::ftp_endpoint(
    "name: m1\napiEndpoint: ftp://h\ntokenFile: t\n",
    "EndpointInvalid",
    ""
)]
#[case::no_scheme("name: m1\napiEndpoint: h:6443\ntokenFile: t\n", "EndpointInvalid", "")]
#[case::socks_proxy(&format!("{MEMBER}proxyURL: socks5://p\n"), "ProxyInvalid", "")]
#[case::oversized(&format!("{MEMBER}# {}\n", "x".repeat(64 * 1024)), "DefinitionInvalid", "larger than")]
fn bad_member_files_are_invalid_members(
    #[case] yaml: &str,
    #[case] want: &str,
    #[case] says: &str,
) {
    let dir = Dir::new();
    let member = dir.write("t", "tok").member(yaml);
    let name = &member.definition.name;
    assert_eq!(
        name, "m1",
        "named after the file when the name is unreadable"
    );
    let reason = member.refused();
    assert_eq!(reason.condition_reason(), want);
    assert!(reason.to_string().contains(says), "{reason}");
}

#[test]
fn relative_paths_resolve_beside_the_member_file() {
    let dir = Dir::new();
    let ca = ca_pem();
    std::fs::create_dir(dir.path("creds")).unwrap();
    dir.write("creds/t", "tok\n").write("creds/ca.crt", &ca);
    let member =
        dir.member("name: m1\napiEndpoint: https://h\ntokenFile: creds/t\ncaFile: creds/ca.crt\n");
    let cred = member.secret.as_ref().unwrap().credential().unwrap();
    assert_eq!(cred.token().unwrap().expose_secret(), "tok");
    assert_eq!(cred.ca_bundle().unwrap().as_ref(), ca.as_bytes());
}

#[tokio::test]
async fn only_visible_yaml_files_are_member_files() {
    let dir = Dir::new();
    for name in ["a.yaml", "b.yml", ".hidden.yaml", "c.txt", "t"] {
        dir.write(name, MEMBER);
    }
    std::fs::create_dir(dir.path("..data")).unwrap();
    let scanned = scan(dir.0.path()).await.unwrap();
    let names: Vec<_> = (scanned.iter())
        .map(|m| m.path.file_name().unwrap().to_string_lossy())
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
fn bad_credential_files_are_typed_errors(
    #[case] token: Option<&[u8]>,
    #[case] ca: Option<Option<&[u8]>>,
    #[case] want: &str,
) {
    let dir = Dir::new();
    let mut yaml = MEMBER.to_owned();
    if let Some(token) = token {
        dir.write("t", token);
    }
    if let Some(ca) = ca {
        yaml.push_str("caFile: ca.crt\n");
        if let Some(ca) = ca {
            dir.write("ca.crt", ca);
        }
    }
    let err = match &dir.member(&yaml).secret {
        None => SourceError::NotFound { key: dir.key() },
        Some(secret) => secret.credential().unwrap_err().clone(),
    };
    assert!(format!("{err:?}").starts_with(want), "{err:?}");
}

#[rstest]
#[case::regular("t", |d: &Path| std::fs::write(d.join("t"), "tok").unwrap(), "Ok")]
#[case::fifo("t", |d: &Path| fifo(&d.join("t")), "not a regular file")]
#[case::endless("t", |d: &Path| symlink("/dev/zero", d.join("t")).unwrap(), "leads out")]
#[case::outside("t", |d: &Path| symlink("/etc/passwd", d.join("t")).unwrap(), "leads out")]
#[case::oversized(
    "t",
    |d: &Path| std::fs::write(d.join("t"), vec![b'a'; 16 * 1024 + 1]).unwrap(),
    "larger than 16384"
)]
#[case::parent("../t", |_: &Path| {}, "'..'")]
#[case::absolute("/etc/hostname", |_: &Path| {}, "absolute path")]
#[tokio::test]
async fn hostile_token_files_are_secret_invalid_at_once(
    #[case] token: &str,
    #[case] prepare: fn(&Path),
    #[case] want: &str,
) {
    let dir = Dir::new();
    prepare(dir.0.path());
    dir.write(
        "m1.yaml",
        format!("name: m1\napiEndpoint: https://h\ntokenFile: {token:?}\n"),
    );
    let scanned = tokio::time::timeout(std::time::Duration::from_secs(2), scan(dir.0.path()))
        .await
        .expect("a hostile token file must not block the poll")
        .unwrap();
    let got = match scanned[0].secret.as_ref().map(StoredSecret::credential) {
        None => "NotFound".to_owned(),
        Some(Ok(_)) => "Ok".to_owned(),
        Some(Err(err)) => err.to_string(),
    };
    assert!(got.contains(want), "{token}: {got}");
}

#[tokio::test]
async fn a_missing_directory_is_an_error() {
    let err = scan(Path::new("/nonexistent/tether-members"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ReadDirectory { .. }), "{err:?}");
}

#[test]
fn a_federated_member_file_names_no_credential_and_keeps_its_ca() {
    let (dir, ca) = (Dir::new(), ca_pem());
    let member = dir
        .write("ca.crt", &ca)
        .member("name: m1\napiEndpoint: https://h:6443\ncredential: federated\ncaFile: ca.crt\n");
    let spec = member.definition.spec.as_ref().unwrap();
    assert_eq!(spec.secret_ref, CredentialKey::federated("m1"));
    let federation = spec.federation.as_ref().unwrap();
    assert_eq!(federation.ca_bundle.as_deref(), Some(ca.as_bytes()));
    assert!(member.secret.is_none(), "no credential file is read");
}

#[rstest]
#[case::with_a_token(&format!("{MEMBER}credential: federated\n"), "tokenFile must not be given")]
#[case::unknown_kind(
    "name: m1\napiEndpoint: https://h\ncredential: token\n",
    "the only value known"
)]
#[case::beside_a_kubeconfig(
    "name: m1\nkubeconfig: k\ncredential: federated\n",
    "credential must not be given"
)]
#[case::missing_ca(
    "name: m1\napiEndpoint: https://h\ncredential: federated\ncaFile: none.crt\n",
    "not found"
)]
fn a_federated_member_file_that_names_more_is_refused(#[case] yaml: &str, #[case] says: &str) {
    let dir = Dir::new();
    let member = dir.write("t", "tok").member(yaml);
    let reason = member.refused();
    assert_eq!(reason.condition_reason(), "DefinitionInvalid");
    assert!(reason.to_string().contains(says), "{reason}");
}
