//! Member files as a poll hands them over: a rewritten certificate is a rotation.

use std::path::Path;

use super::*;
use crate::{directory, test_ca::client_pem};

/// Reads `m1.yaml` in `dir` as a poll does and applies it as the driver does.
async fn poll(h: &mut Harness, dir: &Path) {
    let path = dir.join("m1.yaml");
    let scanned = directory::read_member_blocking(dir, path.clone());
    let key = Origin::file_key(&path);
    match scanned.secret {
        Some(secret) => h.table.apply_secret(key, secret).await.unwrap(),
        None => h.table.remove_secret(&key).await.unwrap(),
    }
    h.table
        .apply_definition(Origin::File(path), scanned.definition)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_rewritten_certificate_file_is_a_rotation_and_an_unchanged_one_is_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let write_identity = |name: &str| {
        let (cert, client_key) = client_pem(name);
        std::fs::write(dir.path().join("c.crt"), cert).unwrap();
        std::fs::write(dir.path().join("c.key"), client_key).unwrap();
    };
    write_identity("first");
    std::fs::write(
        dir.path().join("m1.yaml"),
        "name: m1\napiEndpoint: https://10.0.0.1:6443\nclientCertFile: c.crt\nclientKeyFile: c.key\n",
    )
    .unwrap();
    let mut h = harness();
    poll(&mut h, dir.path()).await;
    let spec = h.expect_upserted();
    let first = h.tokens.get(&spec.secret_ref).await.unwrap();
    assert_eq!(first.identity().unwrap().subject(), "first");

    poll(&mut h, dir.path()).await;
    assert_eq!(h.next(), None, "the same files are the same credential");

    write_identity("second");
    poll(&mut h, dir.path()).await;
    h.expect_rotated("m1", spec.secret_ref.clone());
    let second = h.tokens.get(&spec.secret_ref).await.unwrap();
    assert_eq!(second.identity().unwrap().subject(), "second");
}
