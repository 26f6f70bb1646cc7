//! What to do about each reason: the table of reasons' remedies, as `collector check` prints
//! them.

use crate::reason::Reason;

/// The reason of a `--member` no source defines; `collector check`'s only.
pub(crate) const NOT_DEFINED: &str = "NotDefined";
/// The reason of a member whose Secrets are not listed yet; `collector check`'s only.
pub(crate) const PENDING: &str = "Pending";

/// The remedy for `reason`.
pub(crate) fn remedy(reason: &str) -> &'static str {
    Reason::named(reason).map_or(
        "see Troubleshooting, docs/src/operations/troubleshooting.md",
        |reason| reason.doc().remedy,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[test]
    fn the_check_only_reasons_are_in_the_table() {
        for reason in [NOT_DEFINED, PENDING] {
            assert!(Reason::named(reason).is_some(), "{reason}");
        }
    }

    #[rstest]
    #[case::unauthorized("Unauthorized", "mint a new token")]
    #[case::forbidden_is_rbac_not_a_new_token("Forbidden", "grant its identity")]
    #[case::unreachable("Unreachable", "caBundle")]
    #[case::exec("ExecNotAllowed", "--allow-exec")]
    #[case::secret_of_another_member("SecretForbidden", "tether.io/member=<member>")]
    #[case::duplicate_name("DefinitionInvalid", "claim the same member name")]
    #[case::unknown_member(NOT_DEFINED, "--member")]
    #[case::expired_chain("TokenExpired", "create token")]
    fn the_remedy_says_what_to_do(#[case] reason: &str, #[case] says: &str) {
        assert!(
            remedy(reason).contains(says),
            "{reason}: {}",
            remedy(reason)
        );
    }

    #[test]
    fn an_unknown_reason_points_to_the_books_troubleshooting() {
        assert!(remedy("Whatever").contains("docs/src/operations/troubleshooting.md"));
    }
}
