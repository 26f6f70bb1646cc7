//! What to do about each reason: one table, its texts taken from the README's
//! Troubleshooting, so that the check and the README say the same.

/// Reasons of `collector check` that are no condition reason: the member named by `--member`
/// is not defined, or its definition waits for its Secrets to be listed.
pub(crate) const NOT_DEFINED: &str = "NotDefined";
/// See [`NOT_DEFINED`].
pub(crate) const PENDING: &str = "Pending";

/// Reason → remedy. Every reason the conditions use (README "Conditions and reasons" and "Why a
/// member cannot be used") has a row; the tests hold it to that.
const REMEDIES: &[(&str, &str)] = &[
    ("MemberReady", "none needed"),
    (
        "Unauthorized",
        "the member rejects the token even after Tether re-read it; the ServiceAccount behind it \
         was probably deleted or recreated (tokens are bound to its UID): mint a new token and \
         write it to the Secret, no restart needed",
    ),
    (
        "Forbidden",
        "the credential is accepted (403 is not 401) but lacks a permission: grant its identity \
         get, list and watch on the kinds denied above, and get on /readyz, on the member",
    ),
    (
        "MirrorFailing",
        "a mirrored kind cannot be listed or watched (not served, say): check --mirror against \
         the member's API",
    ),
    (
        "Unreachable",
        "the network or TLS failed, so nothing is known about the credential; after a CA \
         rotation on the member, update the Secret's caBundle (the client is rebuilt by itself)",
    ),
    (
        "SecretNotFound",
        "the referenced Secret (or token file) does not exist: create it, or fix the secretRef",
    ),
    (
        "SecretInvalid",
        "the message says which key is wrong; tokens are trimmed, and a token with an inner \
         newline or control character is refused",
    ),
    (
        "SecretForbidden",
        "the message says which: the Secret is bound to another member (a Secret serves one \
         member only: its tether.io/member label, else its Karmada Cluster owner, else its \
         name), so if it really is this member's credential, label it \
         tether.io/member=<member>; or the secretRef points to a namespace the collector has \
         no Role in: add it to --secret-namespace (the chart's secretNamespaces) and grant \
         get, list and watch on Secrets there",
    ),
    (
        "ExecNotAllowed",
        "the message names the refused command, argument position or variable: declare the \
         plugin and what a definition may pass (each by pattern) with --exec-plugins, or allow \
         a plugin that takes nothing from the definition with --allow-exec",
    ),
    (
        "ExecFailed",
        "the message quotes the plugin's stderr; --exec-timeout sets how long it may run",
    ),
    (
        "CertificateInvalid",
        "write a client certificate and matching key (PEM) to the Secret",
    ),
    (
        "CertificateExpired",
        "write a renewed client certificate to the Secret",
    ),
    (
        "EndpointInvalid",
        "give the member an https://host[:port] API endpoint",
    ),
    (
        "EndpointForbidden",
        "the endpoint or proxy points where a token may not go: fix the definition, or widen \
         what is allowed with --allow-endpoint, --allow-plain-http or --allow-insecure-members",
    ),
    (
        "ProxyInvalid",
        "give the member an http:// or https:// proxy URL, or none",
    ),
    (
        "ProviderNotFound",
        "add one of the ClusterProfile's access providers to --clusterprofile-provider-file",
    ),
    (
        "DefinitionInvalid",
        "fix the member's definition: the message says what does not parse, or which \
         definitions claim the same member name (remove or rename all but one)",
    ),
    (
        "PullMode",
        "none: Karmada's agent manages pull-mode clusters, and Tether leaves them alone on \
         purpose",
    ),
    (
        PENDING,
        "the Secrets of the member's namespace are not listed yet: check the collector's get, \
         list and watch on Secrets there, or raise --check-timeout",
    ),
    (
        NOT_DEFINED,
        "no source defines a member of this name: check --member and --members-from",
    ),
];

/// The remedy for `reason`.
pub(crate) fn remedy(reason: &str) -> &'static str {
    REMEDIES
        .iter()
        .find(|(known, _)| *known == reason)
        .map_or("see the README's Troubleshooting", |(_, remedy)| remedy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// Every reason in the README's tables of condition reasons.
    const CONDITION_REASONS: &[&str] = &[
        "MemberReady",
        "Unauthorized",
        "Forbidden",
        "MirrorFailing",
        "Unreachable",
        "SecretNotFound",
        "SecretInvalid",
        "SecretForbidden",
        "ExecNotAllowed",
        "ExecFailed",
        "CertificateInvalid",
        "CertificateExpired",
        "EndpointInvalid",
        "EndpointForbidden",
        "ProxyInvalid",
        "ProviderNotFound",
        "DefinitionInvalid",
        "PullMode",
    ];

    #[test]
    fn every_condition_reason_has_its_own_remedy() {
        for reason in CONDITION_REASONS {
            assert_ne!(
                remedy(reason),
                remedy("NoSuchReason"),
                "{reason} has no remedy"
            );
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
    fn the_remedy_says_what_to_do(#[case] reason: &str, #[case] says: &str) {
        assert!(
            remedy(reason).contains(says),
            "{reason}: {}",
            remedy(reason)
        );
    }

    #[test]
    fn an_unknown_reason_points_to_the_readme() {
        assert!(remedy("Whatever").contains("Troubleshooting"));
    }
}
