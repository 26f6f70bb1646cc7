//! What the driver does with `ClusterProfile` watch events: each profile defines a member and
//! holds its plugin plan.

use kube::runtime::watcher;
use member_client::CredentialKey;

use super::RegistryDriver;
use crate::{
    clusterprofile::{ClusterProfile, ClusterProfileConfig},
    member_table::{Closed, Origin},
    secret_watches::{NamespacedWatches, WatchItem},
    source_state::{Source, SourceState},
    watch::Change,
};

/// The `ClusterProfile` watches: one per configured namespace.
pub(super) type ProfileWatches = NamespacedWatches<ClusterProfile>;

impl RegistryDriver {
    /// The `ClusterProfile` watches; none when profiles are not read.
    pub(super) fn profile_watches(&self) -> ProfileWatches {
        (self.configs.clusterprofile.as_ref()).map_or_else(
            NamespacedWatches::default,
            |(client, config)| {
                NamespacedWatches::configured(
                    client,
                    &config.namespaces,
                    &watcher::Config::default(),
                )
            },
        )
    }

    pub(super) async fn on_profile_item(
        &mut self,
        (ns, event): WatchItem<ClusterProfile>,
        watches: &mut ProfileWatches,
    ) -> Result<(), Closed> {
        match watches.record(&ns, event, ClusterProfileConfig::key) {
            Some(change) => self.on_profile(&ns, change).await,
            None => Ok(()),
        }
    }

    async fn on_profile(
        &mut self,
        ns: &str,
        change: Change<ClusterProfile, CredentialKey>,
    ) -> Result<(), Closed> {
        match change {
            Change::Applied(profile, _) => {
                let Some((_, config)) = &self.configs.clusterprofile else {
                    return Ok(());
                };
                let member = config.member_from_profile(&profile);
                // The plan first, so that a new member is Ready at its first settle.
                match member.secret {
                    Some(secret) => self.table.apply_secret(member.key.clone(), secret).await?,
                    None => self.table.remove_secret(&member.key).await?,
                }
                self.table
                    .apply_definition(Origin::ClusterProfile(member.key), member.definition)
                    .await
            }
            Change::Deleted(key) => self.profile_gone(&key).await,
            Change::Listed(gone) => {
                for key in gone {
                    self.profile_gone(&key).await?;
                }
                let listed = Source::ClusterProfiles(ns.to_owned());
                self.sources.set(&listed, SourceState::Listed);
                Ok(())
            }
            Change::Failed(err) => {
                tracing::warn!(namespace = %ns, error = %err, "watching ClusterProfiles failed; retrying");
                self.list_failed(&Source::ClusterProfiles(ns.to_owned()), &err);
                Ok(())
            }
        }
    }

    /// A profile is gone: its member is Removed, and its plan forgotten.
    async fn profile_gone(&mut self, key: &CredentialKey) -> Result<(), Closed> {
        self.table
            .remove_definition(&Origin::ClusterProfile(key.clone()))
            .await?;
        self.table.remove_secret(key).await
    }
}
