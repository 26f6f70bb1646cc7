use std::collections::BTreeSet;

use super::*;
use crate::member::health::MemberHealth;
use crate::minting::{MintState, RefusalKind};

/// `docs/src/reference/reasons.md`: the table, under a heading and what the columns mean.
#[test]
fn the_reasons_page_is_current() {
    let page = format!(
        "# Reasons\n\n\
         Every reason Tether gives a member: in its `Ready` and `CredentialsValid` conditions, \
         its Events, the read API and `collector check`, with the status each condition gets, \
         when it happens and what to do.\n\n{}",
        Reason::markdown_table()
    );
    let source = "the table of reasons, crates/collector/src/reason/table.rs";
    crate::reference::assert_page_current("reasons.md", source, "reason", &page);
}

/// Whatever the registry, member-client, the probe and minting say is in the table, and the
/// table holds nothing that none of them says.
#[test]
fn the_table_is_exactly_what_the_code_gives() {
    let mut given: BTreeSet<&str> = BTreeSet::new();
    given.extend(InvalidReason::CONDITION_REASONS);
    given.extend(LimitExceeded::CONDITION_REASONS);
    let health = [
        MemberHealth::Unknown,
        MemberHealth::Healthy,
        MemberHealth::Unauthorized,
        MemberHealth::Forbidden(String::new()),
        MemberHealth::MirrorFailing(String::new()),
        MemberHealth::Syncing,
        MemberHealth::Settling(String::new()),
        MemberHealth::Unreachable(String::new()),
    ];
    given.extend(health.iter().map(MemberHealth::reason));
    given.insert(MemberHealth::Healthy.credentials_valid_reason());
    let refusals = [
        RefusalKind::NotAllowed,
        RefusalKind::OverCap,
        RefusalKind::NotMintable,
        RefusalKind::ServiceAccountMismatch,
        RefusalKind::MintedTokenMismatch,
    ];
    given.extend(refusals.map(RefusalKind::reason));
    let mint_states = [
        MintState::Expired(String::new()),
        MintState::Failed(String::new()),
    ];
    given.extend(mint_states.iter().filter_map(MintState::reason));
    given.extend([
        crate::check::remedy::NOT_DEFINED,
        crate::check::remedy::PENDING,
    ]);

    for name in &given {
        assert!(Reason::named(name).is_some(), "{name} is not in the table");
    }
    let listed: BTreeSet<&str> = Reason::ALL.iter().map(|reason| reason.name()).collect();
    let unused: Vec<_> = listed.difference(&given).collect();
    assert!(unused.is_empty(), "no code gives {unused:?}");
}

#[test]
fn names_are_unique_and_found_again() {
    for reason in Reason::ALL {
        assert_eq!(Reason::named(reason.name()), Some(*reason));
    }
    assert_eq!(Reason::named("NoSuchReason"), None);
}

#[test]
fn every_reason_says_when_and_what_to_do_on_one_line() {
    for reason in Reason::ALL {
        let doc = reason.doc();
        for text in [doc.when, doc.remedy] {
            assert!(!text.trim().is_empty(), "{}", reason.name());
            assert!(!text.contains(['\n', '|']), "{}: {text}", reason.name());
        }
    }
}

#[test]
fn a_condition_reason_sets_both_conditions_and_a_check_reason_neither() {
    for reason in Reason::ALL {
        let doc = reason.doc();
        let check_only = [Reason::Pending, Reason::NotDefined].contains(reason);
        assert_eq!(
            doc.ready == ConditionValue::NotWritten,
            check_only,
            "{}",
            reason.name()
        );
        assert_eq!(
            doc.credentials_valid == ConditionValue::NotWritten,
            check_only,
            "{}",
            reason.name()
        );
    }
}
