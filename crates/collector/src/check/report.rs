//! The check's findings, one [`MemberReport`] per member, and the exit-code rule.

use serde::Serialize;

use super::{
    credential::CredentialSummary,
    probe::{Access, Readyz, Whoami},
    tls::TlsReport,
};

/// Everything the check found.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Report {
    /// Whether every source listed and every member checked is fully usable: exit code 0.
    pub(crate) usable: bool,
    /// Each source of member definitions, and whether it listed.
    pub(crate) sources: Vec<SourceReport>,
    /// Each member checked, by name.
    pub(crate) members: Vec<MemberReport>,
}

/// One source of member definitions.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize)]
pub(crate) struct SourceReport {
    /// What it is (`Karmada Clusters`, `member files in /etc/tether/members`, ...).
    pub(crate) source: String,
    /// `Listed`, `Listing` (not yet, at the deadline) or `Failing`.
    pub(crate) state: &'static str,
    /// Why its list fails.
    pub(crate) error: Option<String>,
}

/// One member's findings.
#[serde_with::skip_serializing_none]
#[derive(Debug, Default, Serialize)]
pub(crate) struct MemberReport {
    /// The member's name.
    pub(crate) name: String,
    /// The reason Tether would give in its conditions (`MemberReady`, `Unauthorized`, ...).
    pub(crate) reason: String,
    /// The sentence the condition message would carry.
    pub(crate) message: String,
    /// What to do about it.
    pub(crate) remedy: &'static str,
    /// Whether the collector could use it fully: the reason is `MemberReady`.
    pub(crate) usable: bool,
    /// Where its definition came from.
    pub(crate) definition: Option<String>,
    /// The kind of that source (`karmada`, `argocd`, `directory`, ...).
    pub(crate) source: Option<&'static str>,
    /// Its API endpoint.
    pub(crate) endpoint: Option<String>,
    /// Its credential, described.
    pub(crate) credential: Option<CredentialSummary>,
    /// Who the member says the credential is.
    pub(crate) whoami: Option<Whoami>,
    /// `list`/`watch` on each mirrored kind and on nodes.
    pub(crate) access: Vec<Access>,
    /// `/readyz` with the member's client.
    pub(crate) readyz: Option<Readyz>,
    /// The TLS handshake.
    pub(crate) tls: Option<TlsReport>,
}

impl Report {
    /// A report of `members` and `sources`; usable as [`exit_code`](Self::exit_code) says.
    pub(crate) fn new(sources: Vec<SourceReport>, members: Vec<MemberReport>) -> Self {
        let usable = !members.is_empty()
            && members.iter().all(|m| m.usable)
            && sources.iter().all(|s| s.state == "Listed");
        Self {
            usable,
            sources,
            members,
        }
    }

    /// 0 when every source listed and every member checked (at least one) is fully usable;
    /// else 1. (2, for usage and start-up errors, is decided before there is a report.)
    pub(crate) fn exit_code(&self) -> u8 {
        if self.usable { 0 } else { 1 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn member(reason: &str) -> MemberReport {
        MemberReport {
            name: reason.to_lowercase(),
            reason: reason.to_owned(),
            usable: reason == "MemberReady",
            ..MemberReport::default()
        }
    }

    fn source(state: &'static str) -> SourceReport {
        SourceReport {
            source: "Karmada Clusters".into(),
            state,
            error: None,
        }
    }

    #[rstest]
    #[case::all_ready(&["MemberReady", "MemberReady"], "Listed", 0)]
    #[case::one_rejected(&["MemberReady", "Unauthorized"], "Listed", 1)]
    #[case::forbidden_is_not_usable(&["Forbidden"], "Listed", 1)]
    #[case::not_defined(&["NotDefined"], "Listed", 1)]
    #[case::nothing_to_check(&[], "Listed", 1)]
    #[case::a_source_not_listed(&["MemberReady"], "Failing", 1)]
    fn exit_zero_only_when_everything_is_usable(
        #[case] reasons: &[&str],
        #[case] state: &'static str,
        #[case] code: u8,
    ) {
        let report = Report::new(
            vec![source(state)],
            reasons.iter().copied().map(member).collect(),
        );
        assert_eq!(report.exit_code(), code);
    }
}
