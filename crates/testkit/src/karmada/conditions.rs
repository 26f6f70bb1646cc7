//! What the collector writes into a `Cluster`'s status, read back as Karmada stores it.

use std::time::Duration;

use anyhow::{Context as _, Result};
use serde_json::Value;

use super::Karmada;
use crate::eventually;

/// One condition of a `Cluster`'s status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Condition {
    /// `type`, such as `Ready` or `CredentialsValid`.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The reason, a CamelCase word.
    pub reason: String,
    /// The message for people.
    pub message: String,
}

impl Condition {
    fn from_json(condition: &Value) -> Self {
        let text = |key: &str| condition[key].as_str().unwrap_or_default().to_owned();
        Self {
            type_: text("type"),
            status: text("status"),
            reason: text("reason"),
            message: text("message"),
        }
    }
}

impl Karmada {
    /// The status of `Cluster` `name` as stored (`null` before anyone wrote one).
    ///
    /// # Errors
    /// API errors, such as no such `Cluster`.
    pub async fn status(&self, name: &str) -> Result<Value> {
        let cluster = self
            .clusters()
            .get(name)
            .await
            .with_context(|| format!("reading the Cluster {name}"))?;
        Ok(cluster.data.get("status").cloned().unwrap_or_default())
    }

    /// The conditions of `Cluster` `name`, in the order written.
    pub async fn conditions(&self, name: &str) -> Result<Vec<Condition>> {
        let status = self.status(name).await?;
        Ok((status["conditions"].as_array().into_iter().flatten())
            .map(Condition::from_json)
            .collect())
    }

    /// Condition `type_` of `Cluster` `name`, if written.
    pub async fn find_condition(&self, name: &str, type_: &str) -> Result<Option<Condition>> {
        let conditions = self.conditions(name).await?;
        Ok(conditions.into_iter().find(|c| c.type_ == type_))
    }

    /// The status and reason of condition `type_` of `Cluster` `name`, if written.
    pub async fn condition(&self, name: &str, type_: &str) -> Result<Option<(String, String)>> {
        let found = self.find_condition(name, type_).await?;
        Ok(found.map(|c| (c.status, c.reason)))
    }

    /// The message of condition `type_` of `Cluster` `name`, if written.
    pub async fn condition_message(&self, name: &str, type_: &str) -> Result<Option<String>> {
        let found = self.find_condition(name, type_).await?;
        Ok(found.map(|c| c.message))
    }

    /// Polls until `Cluster` `name` has condition `type_` with `want`, `status/reason` (as
    /// `True/MemberReady`), and returns how long that took.
    ///
    /// # Errors
    /// Not reaching it within `limit` (the error names the last value seen).
    pub async fn wait_condition(
        &self,
        name: &str,
        type_: &str,
        want: &str,
        limit: Duration,
    ) -> Result<Duration> {
        let started = tokio::time::Instant::now();
        eventually(&format!("{name}: {type_} is {want}"), limit, || async {
            let now = self.condition(name, type_).await?;
            let now = now.map(|(status, reason)| format!("{status}/{reason}"));
            anyhow::ensure!(now.as_deref() == Some(want), "{now:?}");
            anyhow::Ok(())
        })
        .await?;
        Ok(started.elapsed())
    }

    /// Polls until `Cluster` `name` is `Ready=True/MemberReady` and
    /// `CredentialsValid=True/CredentialsAccepted`.
    ///
    /// # Errors
    /// Not reaching both within `limit` each.
    pub async fn wait_healthy(&self, name: &str, limit: Duration) -> Result<()> {
        self.wait_condition(name, "Ready", "True/MemberReady", limit)
            .await?;
        self.wait_condition(name, "CredentialsValid", "True/CredentialsAccepted", limit)
            .await?;
        Ok(())
    }
}
