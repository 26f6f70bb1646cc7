//! The collector's image is built from base images pinned by digest: a rebuild starts from the
//! bytes that were reviewed, never from whatever a moving tag points at that day.

use e2e::manifest::repo_root;

/// Whether `image` (`name[:tag]@sha256:<64 hex>`) names its content by digest.
fn pinned_by_digest(image: &str) -> bool {
    image.split_once("@sha256:").is_some_and(|(name, digest)| {
        !name.is_empty()
            && digest.len() == 64
            && digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[test]
fn every_base_image_of_the_dockerfile_is_pinned_by_digest() -> anyhow::Result<()> {
    let dockerfile = std::fs::read_to_string(repo_root().join("Dockerfile"))?;
    let bases: Vec<&str> = dockerfile
        .lines()
        .filter_map(|line| line.trim().strip_prefix("FROM "))
        .filter_map(|rest| rest.split_whitespace().next())
        .collect();
    assert!(!bases.is_empty(), "no FROM in the Dockerfile");
    for base in bases {
        assert!(pinned_by_digest(base), "{base} is not pinned by digest");
    }
    Ok(())
}

#[test]
fn a_tag_alone_is_not_a_pin() -> anyhow::Result<()> {
    assert!(!pinned_by_digest("rust:1.95-bookworm"));
    assert!(!pinned_by_digest("rust@sha256:abc"));
    assert!(pinned_by_digest(&format!(
        "rust:1.95@sha256:{}",
        "0a".repeat(32)
    )));
    Ok(())
}
