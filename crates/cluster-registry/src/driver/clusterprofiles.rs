//! What the driver does with `ClusterProfile` watch events: each profile defines a member and
//! holds its plugin plan.

use kube::{
    ResourceExt as _,
    runtime::watcher::{self, Event},
};
use member_client::CredentialKey;

use super::RegistryDriver;
use crate::{
    clusterprofile::{ClusterProfile, ClusterProfileConfig},
    member_table::{Closed, Origin},
    source_state::{Source, SourceState},
    watch::Relist,
};

impl RegistryDriver {
    pub(super) async fn on_profile(
        &mut self,
        ns: &str,
        event: Result<Event<ClusterProfile>, watcher::Error>,
        relist: &mut Relist<CredentialKey>,
    ) -> Result<(), Closed> {
        let listed = matches!(event, Ok(Event::InitApply(_)));
        match event {
            Ok(Event::Apply(profile) | Event::InitApply(profile)) => {
                let Some((_, config)) = &self.configs.clusterprofile else {
                    return Ok(());
                };
                let member = config.member_from_profile(&profile);
                relist.applied(&member.key, listed);
                // The plan first, so that a new member is Ready at its first settle.
                match member.secret {
                    Some(secret) => self.table.apply_secret(member.key.clone(), secret).await?,
                    None => self.table.remove_secret(&member.key).await?,
                }
                self.table
                    .apply_definition(Origin::ClusterProfile(member.key), member.definition)
                    .await
            }
            Ok(Event::Delete(profile)) => {
                let key = ClusterProfileConfig::key(ns, &profile.name_any());
                relist.deleted(&key);
                self.profile_gone(&key).await
            }
            Ok(Event::Init) => Ok(()),
            Ok(Event::InitDone) => {
                for key in relist.done() {
                    self.profile_gone(&key).await?;
                }
                let listed = Source::ClusterProfiles(ns.to_owned());
                self.sources.set(&listed, SourceState::Listed);
                Ok(())
            }
            Err(err) => {
                relist.failed();
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
