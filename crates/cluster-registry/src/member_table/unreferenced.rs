//! Secrets of a watched namespace that no Karmada `Cluster` names.
//!
//! A namespace's watch sees every Secret in it. One that no Cluster names is neither parsed
//! nor stored, nor does its change invalidate anything; only its name is kept, so that a
//! Cluster naming it later waits (`Pending`, not `SecretNotFound`) while the driver lists the
//! namespace again.

use std::collections::BTreeSet;

use member_client::CredentialKey;

use super::{Closed, MemberTable, Origin};

impl MemberTable {
    /// The Secrets the Karmada definitions reference: the only ones of their namespaces that
    /// are parsed and stored.
    pub(crate) fn karmada_secret_refs(&self) -> BTreeSet<CredentialKey> {
        self.definitions
            .iter()
            .filter(|(origin, _)| matches!(origin, Origin::Karmada(_)))
            .filter_map(|(_, def)| def.spec.as_ref().ok())
            .map(|spec| spec.secret_ref.clone())
            // A federated member's credential lives in no Secret.
            .filter(|key| key.federated_member().is_none())
            .collect()
    }

    /// A watch saw `key`, which no Cluster names: forget its content, remember its name.
    pub(crate) async fn secret_unreferenced(&mut self, key: CredentialKey) -> Result<(), Closed> {
        self.remove_secret(&key).await?;
        self.unreferenced.insert(key);
        Ok(())
    }

    /// The Secrets that Clusters now name but that were dropped when seen: their namespaces
    /// must be listed again.
    pub(crate) fn dropped_but_named(&self) -> BTreeSet<CredentialKey> {
        let named = self.karmada_secret_refs();
        self.unreferenced.intersection(&named).cloned().collect()
    }
}
