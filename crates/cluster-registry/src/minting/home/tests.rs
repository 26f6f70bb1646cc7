use std::time::{Duration, SystemTime};

use secrecy::ExposeSecret as _;

use super::*;
use crate::members_dir::tests::{fifo, linked_out, names};

fn record(request: &str) -> MintRecord {
    MintRecord {
        minted_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)),
        handled_request: Some(request.to_owned()),
        ..MintRecord::default()
    }
}

/// Writes `new-token` and `record("r1")` to `home`, based on `base`.
async fn write_new(home: &TokenHome, base: &HomeSnapshot) -> Result<HomeSnapshot, HomeError> {
    let new = SecretString::from("new-token");
    home.write(None, base, Some(&new), &record("r1")).await
}

/// A snapshot of a token file holding `token` and no record.
fn holding(token: &str) -> HomeSnapshot {
    HomeSnapshot {
        token: Some(SecretString::from(token.to_owned())),
        record: MintRecord::default(),
        secret: None,
    }
}

/// A directory holding `m1.token` with `content`, and the file as a token home.
fn token_file_home(content: &str) -> (tempfile::TempDir, PathBuf, TokenHome) {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("m1.token");
    std::fs::write(&token_file, content).unwrap();
    let home = TokenHome::File(token_file.clone());
    (dir, token_file, home)
}

#[tokio::test]
async fn a_token_file_is_replaced_with_its_record_beside_it() {
    let (dir, token_file, home) = token_file_home("old-token\n");
    let base = home.read(None).await.unwrap();
    assert_eq!(base.token.as_ref().unwrap().expose_secret(), "old-token");
    assert_eq!(base.record, MintRecord::default());

    let written = write_new(&home, &base).await.unwrap();
    assert_eq!(written.token.unwrap().expose_secret(), "new-token");
    assert_eq!(std::fs::read_to_string(&token_file).unwrap(), "new-token");
    let again = home.read(None).await.unwrap();
    assert_eq!(again.record, record("r1"));
    assert_eq!(
        names(dir.path()),
        [".m1.token.rotation", "m1.token"],
        "the record beside the token, and no temporary file"
    );
}

#[tokio::test]
async fn a_token_file_that_changed_since_it_was_read_is_not_overwritten() {
    let (_dir, token_file, home) = token_file_home("old-token");
    let base = home.read(None).await.unwrap();
    std::fs::write(&token_file, "written-by-someone-else").unwrap();

    let err = write_new(&home, &base).await.unwrap_err();
    assert_eq!(err, HomeError::Conflict);
    assert_eq!(
        std::fs::read_to_string(&token_file).unwrap(),
        "written-by-someone-else"
    );
}

#[tokio::test]
async fn a_missing_token_file_reads_as_no_token_and_a_secret_needs_a_control_plane() {
    let dir = tempfile::tempdir().unwrap();
    let home = TokenHome::File(dir.path().join("absent.token"));
    assert!(home.read(None).await.unwrap().token.is_none());
    let secret = TokenHome::KarmadaSecret(CredentialKey::new("ns", "s"));
    let read = secret.read(None).await;
    assert!(matches!(read, Err(HomeError::Invalid(_))), "{read:?}");
}

#[test]
fn an_argocd_config_keeps_every_other_field() {
    let mut data = BTreeMap::from([(
        CONFIG_KEY.to_owned(),
        ByteString(br#"{"bearerToken":"old","tlsClientConfig":{"caData":"Q0E="}}"#.to_vec()),
    )]);
    assert_eq!(argocd_token(&data).unwrap().unwrap().expose_secret(), "old");
    set_argocd_token(&mut data, &SecretString::from("new")).unwrap();
    let config: serde_json::Value = serde_json::from_slice(&data[CONFIG_KEY].0).unwrap();
    assert_eq!(
        config,
        serde_json::json!({"bearerToken": "new", "tlsClientConfig": {"caData": "Q0E="}})
    );

    let mut garbage = BTreeMap::from([(CONFIG_KEY.to_owned(), ByteString(b"[1]".to_vec()))]);
    let set = set_argocd_token(&mut garbage, &SecretString::from("new"));
    assert!(matches!(set, Err(HomeError::Invalid(_))), "{set:?}");
}

#[test]
fn a_snapshot_never_shows_its_token() {
    assert!(!format!("{:?}", holding("s3cr3t-token")).contains("s3cr3t"));
}

/// The token file is a symlink to a file outside the directory (standing in for the
/// collector's own ServiceAccount token): it is neither read nor written through.
#[tokio::test]
async fn a_token_file_that_links_out_is_neither_read_nor_written_through() {
    let (outside, dir) = linked_out("victim", "victim-token", "m1.token");
    let token_file = dir.path().join("m1.token");
    let home = TokenHome::File(token_file.clone());

    let err = home.read(None).await.unwrap_err();
    assert!(err.to_string().contains("leads out"), "{err}");

    // A write based on what the link showed is refused too.
    let err = write_new(&home, &holding("victim-token"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("leads out"), "{err}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("victim")).unwrap(),
        "victim-token"
    );
    assert_eq!(names(outside.path()), ["victim"], "nothing created outside");
    assert_eq!(names(dir.path()), ["m1.token"], "no temporary file is left");
}

/// Symlinks planted where a predictable temporary file would go (`.<name>.tmp-<pid>`) do
/// not redirect the write: the temporary file has a random name and is created `O_EXCL`.
#[tokio::test]
async fn planted_temporary_names_do_not_redirect_the_write() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim"), "untouched").unwrap();
    let (dir, token_file, home) = token_file_home("old-token");
    let pid = std::process::id();
    for planted in [
        format!(".m1.token.tmp-{pid}"),
        format!("..m1.token.rotation.tmp-{pid}"),
    ] {
        std::os::unix::fs::symlink(outside.path().join("victim"), dir.path().join(planted))
            .unwrap();
    }
    let base = home.read(None).await.unwrap();
    write_new(&home, &base).await.unwrap();

    assert_eq!(
        std::fs::read_to_string(outside.path().join("victim")).unwrap(),
        "untouched"
    );
    assert_eq!(names(outside.path()), ["victim"]);
    assert!(token_file.symlink_metadata().unwrap().is_file());
    assert_eq!(std::fs::read_to_string(&token_file).unwrap(), "new-token");
    assert_eq!(home.read(None).await.unwrap().record, record("r1"));
    assert_eq!(names(dir.path()).len(), 4, "{:?}", names(dir.path()));
}

#[tokio::test]
async fn a_fifo_as_token_file_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("m1.token");
    fifo(&token_file);
    let home = TokenHome::File(token_file);
    let read = tokio::time::timeout(Duration::from_secs(2), home.read(None))
        .await
        .expect("the read returns at once");
    let err = read.unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

#[cfg(all(feature = "karmada", feature = "argocd"))]
#[test]
fn the_keys_written_are_the_formats_keys() {
    assert_eq!(TOKEN_KEY, crate::karmada::TOKEN_KEY);
    assert_eq!(CONFIG_KEY, crate::argocd::CONFIG_KEY);
}
