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
use kube::{Api, Client, api::GetParams};
use member_client::{CredentialKey, SourceError};
use tokio::sync::Semaphore;

use crate::secret_store::{StoredSecret, secret_data};

/// How long one read may take: a fetch waits for it, and a member waits for its fetch.
const READ_DEADLINE: Duration = Duration::from_secs(10);

/// Reads of one source in flight at once: a replica that gains a thousand members reads their
/// Secrets a few dozen at a time, not all at once against the control plane's fairness limits.
const READS_IN_FLIGHT: usize = 32;

/// How long a read may wait for its turn.
const QUEUE_DEADLINE: Duration = Duration::from_secs(30);

/// Where a Secret is read from.
#[async_trait]
pub(crate) trait SecretGet: Send + Sync + 'static {
    /// The Secret `key` names, or `None` if it does not exist: from the apiserver's watch
    /// cache if `cached` (cheap, possibly behind), else from storage.
    async fn get(&self, key: &CredentialKey, cached: bool) -> Result<Option<Secret>, SourceError>;
}

#[async_trait]
impl SecretGet for Client {
    async fn get(&self, key: &CredentialKey, cached: bool) -> Result<Option<Secret>, SourceError> {
        let api = Api::<Secret>::namespaced(self.clone(), &key.namespace);
        let params = if cached {
            GetParams::any()
        } else {
            GetParams::default()
        };
        let read = async {
            match api.get_with(&key.name, &params).await {
                Ok(secret) => Ok(Some(secret)),
                Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
                Err(err) => Err(err),
            }
        };
        match tokio::time::timeout(READ_DEADLINE, read).await {
            Ok(Ok(secret)) => Ok(secret),
            Ok(Err(err)) => Err(read_failed(key, err)),
            Err(_) => Err(timed_out(key, READ_DEADLINE)),
        }
    }
}

fn timed_out(key: &CredentialKey, deadline: Duration) -> SourceError {
    read_failed(
        key,
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {deadline:?}"),
        ),
    )
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
    turns: Arc<Semaphore>,
}

impl SecretReader {
    pub(crate) fn new(get: impl SecretGet, parse: Parse) -> Self {
        Self {
            get: Arc::new(get),
            parse,
            turns: Arc::new(Semaphore::new(READS_IN_FLIGHT)),
        }
    }

    /// What the source's watch would store for `secret`, readable again through `self`.
    pub(crate) fn stored(&self, key: &CredentialKey, secret: &Secret) -> StoredSecret {
        (self.parse)(key, secret).rereadable(self.clone(), digest(secret))
    }

    /// The Secret `key` names, parsed: from the apiserver's watch cache if it holds what the
    /// watch last delivered (content digest `seen`), else from storage, which is never behind.
    ///
    /// # Errors
    /// [`SourceError::NotFound`] if it is gone, [`SourceError::Read`] if the read failed or
    /// it or its turn took longer than its deadline.
    pub(crate) async fn read(
        &self,
        key: &CredentialKey,
        seen: u64,
    ) -> Result<StoredSecret, SourceError> {
        let _turn = tokio::time::timeout(QUEUE_DEADLINE, self.turns.acquire())
            .await
            .map_err(|_| timed_out(key, QUEUE_DEADLINE))?
            .map_err(|err| read_failed(key, err))?;
        let secret = match self.get.get(key, true).await? {
            Some(cached) if digest(&cached) == seen => Some(cached),
            _ => self.get.get(key, false).await?,
        };
        match secret {
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
