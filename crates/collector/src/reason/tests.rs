use std::collections::BTreeSet;

use super::*;
use crate::member::health::MemberHealth;
use crate::minting::{MintState, RefusalKind};

const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
const BEGIN: &str = "<!-- reasons: generated from crates/collector/src/reason/table.rs -->\n";
const END: &str = "<!-- end of reasons -->";

/// The README's table between its markers.
fn readme_table(readme: &str) -> Option<(usize, usize)> {
    let start = readme.find(BEGIN)? + BEGIN.len();
    let end = start + readme[start..].find(END)?;
    Some((start, end))
}

#[test]
fn the_readme_lists_every_reason_as_the_code_does() {
    let readme = std::fs::read_to_string(README).unwrap();
    let (start, end) = readme_table(&readme).expect("the README's reasons markers");
    let want = Reason::markdown_table();
    if std::env::var_os("BLESS").is_some() {
        let blessed = format!("{}{want}{}", &readme[..start], &readme[end..]);
        std::fs::write(README, blessed).unwrap();
        return;
    }
    assert_eq!(
        readme[start..end],
        want,
        "the README's table of reasons is not the code's; BLESS=1 cargo test -p collector --lib \
         reason rewrites it"
    );
}

/// Every `` `Name` `` in the README that looks like a reason (a `Ready` or `CredentialsValid`
/// reason mentioned in prose, in Troubleshooting, say) is one.
#[test]
fn every_reason_the_readme_names_exists() {
    let readme = std::fs::read_to_string(README).unwrap();
    let mut seen = 0;
    for (at, _) in readme.match_indices("reason `") {
        let rest = &readme[at + "reason `".len()..];
        let name = &rest[..rest.find('`').unwrap_or(0)];
        if name.starts_with(|c: char| c.is_ascii_uppercase()) {
            assert!(
                Reason::named(name).is_some(),
                "the README names reason {name} that no code gives"
            );
            seen += 1;
        }
    }
    assert!(seen > 0, "the README names no reason in prose");
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
