//! The directory poll: each tick scans the member files and applies what changed.

use std::{collections::BTreeSet, path::PathBuf};

use super::RegistryDriver;
use crate::member_table::Closed;
#[cfg(feature = "directory")]
use crate::{
    directory,
    member_table::Origin,
    source_state::{Source, SourceState},
};

impl RegistryDriver {
    /// Without the directory source there is no poll: its tick never comes.
    #[cfg(not(feature = "directory"))]
    pub(super) async fn poll_directory(&mut self, _: &mut BTreeSet<PathBuf>) -> Result<(), Closed> {
        Ok(())
    }

    #[cfg(feature = "directory")]
    pub(super) async fn poll_directory(
        &mut self,
        known: &mut BTreeSet<PathBuf>,
    ) -> Result<(), Closed> {
        let Some(config) = &self.configs.directory else {
            return Ok(());
        };
        let source = Source::Directory(config.path.clone());
        let scanned = match directory::scan(&config.path).await {
            Ok(scanned) => scanned,
            Err(err) => {
                tracing::warn!(error = %err, "reading member files failed; keeping the members read before");
                self.sources
                    .set(&source, SourceState::Failing(err.to_string()));
                return Ok(());
            }
        };
        self.sources.set(&source, SourceState::Listed);
        let mut seen = BTreeSet::new();
        for member in scanned {
            let key = Origin::file_key(&member.path);
            match member.secret {
                Some(secret) => self.table.apply_secret(key, secret).await?,
                None => self.table.remove_secret(&key).await?,
            }
            seen.insert(member.path.clone());
            self.table
                .apply_definition(Origin::File(member.path), member.definition)
                .await?;
        }
        for gone in known.difference(&seen) {
            self.table
                .remove_definition(&Origin::File(gone.clone()))
                .await?;
            self.table.remove_secret(&Origin::file_key(gone)).await?;
        }
        *known = seen;
        Ok(())
    }
}

/// The next tick of the directory poll; never resolves when there is no directory.
pub(super) async fn next_tick(poll: &mut Option<tokio::time::Interval>) -> Option<()> {
    match poll {
        Some(poll) => {
            poll.tick().await;
            Some(())
        }
        None => std::future::pending().await,
    }
}
