//! Every reason Tether gives for a member, in one table: its condition statuses, when it
//! happens and what to do about it.
//!
//! The table is the one source: a member's condition statuses
//! ([`MemberHealth`](crate::member::health::MemberHealth)), `collector check`'s remedies and
//! the book's reasons page come from it, and tests hold the registry's ([`InvalidReason`]) and
//! member-client's ([`LimitExceeded`]) reasons to it. The page,
//! `docs/src/reference/reasons.md`, is rendered by [`Reason::markdown_table`]; a test fails
//! while it differs (`BLESS=1 cargo test -p collector --lib reason` rewrites it).

mod table;

use cluster_registry::InvalidReason;
use member_client::response_limit::LimitExceeded;

pub use table::Reason;

/// The status a reason gives a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionValue {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
    /// Whatever the member's probe says: the reason is about minting, not about the member
    /// answering.
    AsProbe,
    /// The reason is `collector check`'s only; no condition carries it.
    NotWritten,
}

impl ConditionValue {
    /// The condition's `status`, where the reason alone decides it.
    pub fn status(self) -> Option<&'static str> {
        match self {
            Self::True => Some("True"),
            Self::False => Some("False"),
            Self::Unknown => Some("Unknown"),
            Self::AsProbe | Self::NotWritten => None,
        }
    }

    fn cell(self) -> &'static str {
        match self {
            Self::AsProbe => "as the probe says",
            Self::NotWritten => "-",
            other => other.status().unwrap_or("-"),
        }
    }
}

/// What a reason means and what to do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasonDoc {
    /// The `Ready` condition's status with this reason.
    pub ready: ConditionValue,
    /// The `CredentialsValid` condition's status with this reason.
    pub credentials_valid: ConditionValue,
    /// When it happens (Markdown).
    pub when: &'static str,
    /// What to do, as `collector check` prints it.
    pub remedy: &'static str,
}

impl Reason {
    /// The reason of this name.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|reason| reason.name() == name)
    }

    /// The table of reasons, in Markdown.
    pub fn markdown_table() -> String {
        let mut table = String::from(
            "| reason | `Ready` | `CredentialsValid` | when | what to do |\n\
             | --- | --- | --- | --- | --- |\n",
        );
        for reason in Self::ALL {
            let doc = reason.doc();
            table.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                reason.name(),
                doc.ready.cell(),
                doc.credentials_valid.cell(),
                markdown_cell(doc.when),
                markdown_cell(doc.remedy)
            ));
        }
        table
    }
}

/// `text` for a Markdown table cell: a `<` outside a code span is escaped, so that a
/// placeholder such as `<member>` reads as text rather than as an unclosed HTML tag.
fn markdown_cell(text: &str) -> String {
    let parts: Vec<String> = text
        .split('`')
        .enumerate()
        .map(|(i, part)| match i % 2 {
            0 => part.replace('<', "&lt;"),
            _ => part.to_owned(),
        })
        .collect();
    parts.join("`")
}

/// The registry's reasons are named as the table names them; a test holds every one of
/// [`InvalidReason::CONDITION_REASONS`] to it, so the fallback is never taken.
impl From<&InvalidReason> for Reason {
    fn from(reason: &InvalidReason) -> Self {
        Self::named(reason.condition_reason()).unwrap_or(Self::DefinitionInvalid)
    }
}

/// As for [`InvalidReason`], a test holds every [`LimitExceeded::CONDITION_REASONS`] to the
/// table.
impl From<&LimitExceeded> for Reason {
    fn from(limit: &LimitExceeded) -> Self {
        Self::named(limit.condition_reason()).unwrap_or(Self::ResponseTooLarge)
    }
}

#[cfg(test)]
mod tests;
