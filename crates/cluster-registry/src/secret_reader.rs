//! Reading one Secret again: how a replica brings back a credential it withheld, when it comes
//! to own the member (see [`SecretStore::hold`](crate::SecretStore::hold)).

use std::{
    fmt,
    hash::{BuildHasher as _, Hasher as _, RandomState},
    sync::{Arc, LazyLock},
    time::Duration,
};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use member_client::{CredentialKey, SourceError};

use crate::secret_store::{StoredSecret, secret_data};

/// How long one read may take: a fetch waits for it, and a member waits for its fetch.
const READ_DEADLINE: Duration = Duration::from_secs(10);

/// Where a Secret is read from.
#[async_trait]
pub(crate) trait SecretGet: Send + Sync + 'static {
    /// The Secret `key` names, or `None` if it does not exist.
    async fn get(&self, key: &CredentialKey) -> Result<Option<Secret>, SourceError>;
}

#[async_trait]
impl SecretGet for Client {
    async fn get(&self, key: &CredentialKey) -> Result<Option<Secret>, SourceError> {
        let api = Api::<Secret>::namespaced(self.clone(), &key.namespace);
        match tokio::time::timeout(READ_DEADLINE, api.get_opt(&key.name)).await {
            Ok(Ok(secret)) => Ok(secret),
            Ok(Err(err)) => Err(read_failed(key, err)),
            Err(_) => Err(read_failed(
                key,
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {READ_DEADLINE:?}"),
                ),
            )),
        }
    }
}

fn read_failed(
    key: &CredentialKey,
    err: impl std::error::Error + Send + Sync + 'static,
) -> SourceError {
    SourceError::Read {
        key: key.clone(),
        source: Arc::new(err),
    }
}

/// How a source turns a Secret into what the store keeps.
pub(crate) type Parse = Arc<dyn Fn(&CredentialKey, &Secret) -> StoredSecret + Send + Sync>;

/// Reads a Secret of one source again and parses it as that source's watch does.
#[derive(Clone)]
pub(crate) struct SecretReader {
    get: Arc<dyn SecretGet>,
    parse: Parse,
}

impl SecretReader {
    pub(crate) fn new(get: impl SecretGet, parse: Parse) -> Self {
        Self {
            get: Arc::new(get),
            parse,
        }
    }

    /// What the source's watch would store for `secret`, readable again through `self`.
    pub(crate) fn stored(&self, key: &CredentialKey, secret: &Secret) -> StoredSecret {
        (self.parse)(key, secret).rereadable(self.clone(), digest(secret))
    }

    /// The Secret `key` names as it is now, parsed.
    ///
    /// # Errors
    /// [`SourceError::NotFound`] if it is gone, [`SourceError::Read`] if the read failed or
    /// took longer than its deadline.
    pub(crate) async fn read(&self, key: &CredentialKey) -> Result<StoredSecret, SourceError> {
        match self.get.get(key).await? {
            Some(secret) => Ok(self.stored(key, &secret)),
            None => Err(SourceError::NotFound { key: key.clone() }),
        }
    }
}

impl fmt::Debug for SecretReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretReader")
    }
}

/// The key every digest of this process is made with: drawn at random once, so that a digest
/// means nothing outside the process that made it.
static DIGEST_KEY: LazyLock<RandomState> = LazyLock::new(RandomState::new);

/// A keyed digest of what `secret` holds (its `data` with `stringData` over it): two digests
/// differ when the content did, which is all a withheld Secret's changes are judged by.
pub(crate) fn digest(secret: &Secret) -> u64 {
    let mut hasher = DIGEST_KEY.build_hasher();
    for (name, value) in secret_data(secret) {
        hasher.write_usize(name.len());
        hasher.write(name.as_bytes());
        hasher.write_usize(value.len());
        hasher.write(&value);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(data: serde_json::Value) -> Secret {
        serde_json::from_value(json!({"metadata": {"name": "m"}, "stringData": data})).unwrap()
    }

    #[test]
    fn the_digest_changes_with_any_key_or_value_and_only_then() {
        let a = digest(&secret(json!({"token": "t1", "caBundle": "c"})));
        assert_eq!(a, digest(&secret(json!({"caBundle": "c", "token": "t1"}))));
        assert_ne!(a, digest(&secret(json!({"token": "t2", "caBundle": "c"}))));
        assert_ne!(a, digest(&secret(json!({"token": "t1"}))));
        // Lengths are hashed, so moving bytes between a name and its value is a change.
        assert_ne!(
            digest(&secret(json!({"ab": "c"}))),
            digest(&secret(json!({"a": "bc"})))
        );
    }
}
