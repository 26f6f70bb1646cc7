//! The registry reading member files from a directory (no control plane involved), against a
//! real member apiserver.

mod registry_support;

use registry_support::loopback_policy;

use std::path::Path;
use std::time::Duration;

use cluster_registry::{DirectoryConfig, RegistryBuilder, RegistryEvent};
use member_client::FailureKind;
use registry_support::{
    Agents, expect_invalid, list_namespaces, member_client, next_event, next_upserted, whoami,
};
use testkit::Environment;

/// Replaces `path` atomically, so a poll never reads a half-written file.
fn write_atomically(path: &Path, content: impl AsRef<[u8]>) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test]
async fn member_files_follow_token_file_rotation_garbage_and_deletion() -> anyhow::Result<()> {
    let env = Environment::with_members(1).await?;
    let member = env.cluster(1);
    let agents = Agents::create(member).await?;
    let dir = tempfile::tempdir()?;
    let token_file = dir.path().join("member1.token");
    write_atomically(&token_file, format!("{}\n", agents.token_a));
    write_atomically(&dir.path().join("member1-ca.crt"), member.ca_pem());
    let member_file = dir.path().join("member1.yaml");
    let text = format!(
        "name: member1\napiEndpoint: {}\ntokenFile: member1.token\ncaFile: member1-ca.crt\n",
        member.endpoint()
    );
    write_atomically(&member_file, text);
    // A broken member file beside it is reported and harms nobody.
    write_atomically(&dir.path().join("broken.yaml"), "name: [unterminated");

    let directory = DirectoryConfig::new(dir.path()).poll_interval(Duration::from_millis(100));
    let (registry, mut events, driver) = RegistryBuilder::new()
        .endpoint_policy(loopback_policy())
        .directory(directory)
        .build();
    let driver = tokio::spawn(driver.run());

    // Files are read in name order: broken.yaml first.
    let event = next_event(&mut events).await?;
    expect_invalid(&event, "broken", "DefinitionInvalid")?;
    let upserted = next_upserted(&mut events).await?;
    let spec = &upserted.0;
    assert_eq!(spec.name, "member1");
    let client = member_client(&registry, &upserted)?;
    assert_eq!(whoami(&client).await?, agents.user("agent-a"));

    // A new token file: rotated, and the next request carries it.
    write_atomically(&token_file, &agents.token_b);
    assert!(matches!(
        next_event(&mut events).await?,
        RegistryEvent::CredentialsRotated { name, .. } if name == "member1"
    ));
    assert_eq!(whoami(&client).await?, agents.user("agent-b"));

    // Garbage (an empty token file), then no token file at all.
    write_atomically(&token_file, " \n");
    let event = next_event(&mut events).await?;
    expect_invalid(&event, "member1", "SecretInvalid")?;
    std::fs::remove_file(&token_file)?;
    let event = next_event(&mut events).await?;
    expect_invalid(&event, "member1", "SecretNotFound")?;
    assert_eq!(
        list_namespaces(&client).await,
        Err(FailureKind::CredentialUnavailable)
    );

    // The member file removed: Removed.
    std::fs::remove_file(&member_file)?;
    assert_eq!(
        next_event(&mut events).await?,
        RegistryEvent::Removed("member1".into())
    );
    driver.abort();
    Ok(())
}
