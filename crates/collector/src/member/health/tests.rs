use super::*;
use crate::member::informer_state::InformerFailure;
use member_client::CredentialKey;
use rstest::rstest;
use std::sync::Arc;

/// An API error with status `code`.
pub(crate) fn api(code: u16) -> kube::Error {
    kube::Error::Api(Box::new(
        kube::core::Status::failure("x", "y").with_code(code),
    ))
}

fn unavailable(source: SourceError) -> kube::Error {
    kube::Error::Service(Box::new(member_client::Error::CredentialUnavailable {
        member: "m".into(),
        secret: CredentialKey::new("ns", "s"),
        source: Arc::new(source),
    }))
}

#[rstest]
#[case::rejected(
    kube::Error::Service(Box::new(member_client::Error::Unauthorized { member: "m".into(), secret: CredentialKey::new("ns", "s") })),
    "Unauthorized", "False", "False"
)]
#[case::plain_401(api(401), "Unauthorized", "False", "False")]
#[case::forbidden(api(403), "Forbidden", "False", "True")]
#[case::secret_missing(unavailable(SourceError::NotFound { key: CredentialKey::new("ns", "s") }), "SecretNotFound", "False", "False")]
#[case::token_empty(
    unavailable(SourceError::EmptyToken),
    "SecretInvalid",
    "False",
    "False"
)]
#[case::refused(
    kube::Error::Service(Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))),
    "Unreachable",
    "False",
    "Unknown"
)]
#[case::server_error(api(500), "Unreachable", "False", "Unknown")]
#[case::resolved_to_a_forbidden_address(
    kube::Error::Service(Box::new(std::io::Error::other(member_client::validation::ValidationError::Forbidden(
        "169.254.169.254 is a cloud metadata address".into()
    )))),
    "EndpointForbidden",
    "False",
    "Unknown"
)]
fn each_failure_gets_its_own_reason(
    #[case] err: kube::Error,
    #[case] reason: &str,
    #[case] ready: &str,
    #[case] credentials_valid: &str,
) {
    let health = MemberHealth::from_error(&err);
    assert_eq!(conditions(&health), (reason, ready, credentials_valid));
}

#[rstest]
#[case::secret_forbidden(InvalidReason::SecretForbidden("secrets is forbidden".into()), "SecretForbidden", "Unknown", "secrets is forbidden")]
#[case::endpoint(InvalidReason::EndpointInvalid("\"ftp://h\" is not an https URL".into()), "EndpointInvalid", "Unknown", "not an https URL")]
#[case::secret_invalid(InvalidReason::SecretInvalid("the token is empty".into()), "SecretInvalid", "False", "the token is empty")]
fn an_unusable_member_keeps_the_registry_reason(
    #[case] reason: InvalidReason,
    #[case] want_reason: &str,
    #[case] credentials_valid: &str,
    #[case] message: &str,
) {
    let health = MemberHealth::Invalid(reason);
    assert_eq!(
        conditions(&health),
        (want_reason, "False", credentials_valid)
    );
    assert!(health.message().contains(message), "{}", health.message());
}

/// The reason, and the `Ready` and `CredentialsValid` statuses, `health` gives.
fn conditions(health: &MemberHealth) -> (&str, &str, &str) {
    (
        health.reason(),
        health.ready_status(),
        health.credentials_valid_status(),
    )
}

fn failing(kind: FailureKind) -> InformerState {
    InformerState::Failing(InformerFailure {
        kind,
        verb: "list",
        message: "nope".into(),
        ..unreachable()
    })
}

fn unreachable() -> InformerFailure {
    InformerFailure {
        kind: FailureKind::Unreachable,
        verb: "watch",
        message: "reset".into(),
        after_sync: true,
        at: tokio::time::Instant::now(),
        limit: None,
    }
}

#[rstest]
#[case::all_synced(&[InformerState::Synced, InformerState::Synced], "MemberReady", "True")]
#[case::one_listing(&[InformerState::Synced, InformerState::Syncing], "Syncing", "Unknown")]
#[case::refused(&[failing(FailureKind::NotFound), failing(FailureKind::Forbidden)], "Forbidden", "False")]
#[case::not_served(&[InformerState::Syncing, failing(FailureKind::NotFound)], "MirrorFailing", "False")]
// the probe sees transport and credential failures itself
#[case::transport(&[InformerState::Synced, failing(FailureKind::Unreachable)], "MemberReady", "True")]
#[case::transport_before_the_first_list(&[InformerState::Failing(InformerFailure { after_sync: false, ..unreachable() })], "Syncing", "Unknown")]
fn the_informers_decide_whether_a_reachable_member_is_ready(
    #[case] states: &[InformerState],
    #[case] reason: &str,
    #[case] ready: &str,
) {
    let states: BTreeMap<String, InformerState> = states
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("r{i}"), s.clone()))
        .collect();
    let health = MemberHealth::of_mirror(&states);
    assert_eq!((health.reason(), health.ready_status()), (reason, ready));
    assert_eq!(
        health.credentials_valid_status(),
        "True",
        "a 403 is not a 401"
    );
}

#[test]
fn a_refusal_names_the_kind_and_the_verb() {
    let states = BTreeMap::from([(
        "apps/v1/deployments".to_owned(),
        failing(FailureKind::Forbidden),
    )]);
    let message = MemberHealth::of_mirror(&states).message();
    assert!(
        message.contains("may not list apps/v1/deployments"),
        "{message}"
    );
}

#[test]
fn a_broken_limit_is_named_in_the_reason() {
    let limit = LimitExceeded::ResponseTooLarge {
        request: member_client::response_limit::RequestKind::Health,
        limit: 65_536,
    };
    let health = MemberHealth::from_error(&kube::Error::Service(Box::new(limit)));
    assert_eq!(
        (health.reason(), health.ready_status()),
        ("ResponseTooLarge", "False")
    );
    let message = health.message();
    assert!(message.contains("/readyz"), "{message}");
    assert!(message.contains("65536 bytes"), "{message}");

    let over = InformerState::Failing(InformerFailure {
        limit: Some(LimitExceeded::TooManyObjects { limit: 7 }),
        ..unreachable()
    });
    // A broken limit wins over a refusal elsewhere: it is what keeps memory bounded.
    let states = BTreeMap::from([
        (
            "apps/v1/deployments".to_owned(),
            failing(FailureKind::Forbidden),
        ),
        ("core/v1/nodes".to_owned(), over),
    ]);
    let health = MemberHealth::of_mirror(&states);
    assert_eq!(
        (health.reason(), health.ready_status()),
        ("TooManyObjects", "False")
    );
    let message = health.message();
    assert!(
        message.contains("watch core/v1/nodes") && message.contains("--member-max-objects"),
        "{message}"
    );
}

#[test]
fn healthy_member_has_valid_credentials() {
    assert_eq!(MemberHealth::Healthy.ready_status(), "True");
    assert_eq!(MemberHealth::Healthy.credentials_valid_status(), "True");
    assert_eq!(
        MemberHealth::Healthy.credentials_valid_reason(),
        "CredentialsAccepted"
    );
}
