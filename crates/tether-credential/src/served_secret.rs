//! Whether a Secret the caller may read is one tether-credential may serve: Tether's record of
//! one member's credential, for the member asked about, to the server recorded for it.
//!
//! RBAC alone is not enough. A caller that may `get` a ServiceAccount token Secret, or any
//! Secret with a `token` key, would otherwise have it printed for whatever `server` a
//! ClusterProfile names, and client-go would send it there. So the Secret itself must say
//! whose credential it is ([`CREDENTIAL_MEMBER_LABEL`]) and where that credential goes
//! ([`CREDENTIAL_SERVER_ANNOTATION`]); a ClusterProfile's writer can change neither.

use cluster_registry::clusterprofile::{
    CREDENTIAL_MEMBER_LABEL, CREDENTIAL_SERVER_ANNOTATION, SERVICE_ACCOUNT_TOKEN_TYPE,
};
use k8s_openapi::api::core::v1::Secret;
use member_client::text::Text;

use crate::{error::Error, exec_info::ExecRequest};

/// Checks the `stored` Secret against `request`, before anything of its content is read.
///
/// # Errors
/// [`Error::ServiceAccountTokenSecret`], [`Error::NotMarked`], [`Error::MarkedForAnother`],
/// [`Error::NoRecordedServer`] and [`Error::ServerMismatch`].
pub(crate) fn check(stored: &Secret, request: &ExecRequest) -> Result<(), Error> {
    let (member, secret) = (request.member.clone(), request.secret.clone());
    let meta = &stored.metadata;
    let marked = (meta.labels.as_ref()).and_then(|l| l.get(CREDENTIAL_MEMBER_LABEL));
    let recorded = (meta.annotations.as_ref()).and_then(|a| a.get(CREDENTIAL_SERVER_ANNOTATION));
    match (marked, recorded) {
        _ if stored.type_.as_deref() == Some(SERVICE_ACCOUNT_TOKEN_TYPE) => {
            Err(Error::ServiceAccountTokenSecret { member, secret })
        }
        (None, _) => Err(Error::NotMarked { member, secret }),
        (Some(marked), _) if *marked != request.member => Err(Error::MarkedForAnother {
            member,
            secret,
            marked: Text::new(marked).into(),
        }),
        (_, None) => Err(Error::NoRecordedServer { member, secret }),
        // Compared as written: the collector records the very string it publishes as the
        // profile's server, and any other spelling is another profile's.
        (_, Some(recorded)) if *recorded != request.server => Err(Error::ServerMismatch {
            member,
            secret,
            asked: Text::new(&request.server).into(),
            recorded: Text::new(recorded).into(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use member_client::{CredentialKey, exec::ExecApiVersion};
    use rstest::rstest;
    use serde_json::{Value, json};

    const SERVER: &str = "https://127.0.0.1:6443";

    fn request() -> ExecRequest {
        ExecRequest {
            api_version: ExecApiVersion::V1,
            member: "member1".to_owned(),
            secret: CredentialKey::new("fleet", "member1"),
            server: SERVER.to_owned(),
        }
    }

    fn secret(type_: Option<&str>, labels: Value, annotations: Value) -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": "member1", "namespace": "fleet",
                         "labels": labels, "annotations": annotations},
            "type": type_,
            "stringData": {"token": "s3cr3t-token"},
        }))
        .unwrap()
    }

    fn marked() -> Value {
        json!({CREDENTIAL_MEMBER_LABEL: "member1"})
    }

    fn recorded(server: &str) -> Value {
        json!({CREDENTIAL_SERVER_ANNOTATION: server})
    }

    #[test]
    fn the_members_marked_secret_for_its_recorded_server_is_served() {
        let ok = secret(Some("Opaque"), marked(), recorded(SERVER));
        assert!(check(&ok, &request()).is_ok());
        assert!(check(&secret(None, marked(), recorded(SERVER)), &request()).is_ok());
    }

    #[rstest]
    #[case::service_account_token(
        secret(Some(SERVICE_ACCOUNT_TOKEN_TYPE), marked(), recorded(SERVER)),
        "is a ServiceAccount token Secret"
    )]
    #[case::unmarked(
        secret(None, Value::Null, recorded(SERVER)),
        "is not marked as member member1's credential: it needs the label tether.io/member=member1"
    )]
    #[case::other_label(
        secret(None, json!({"app": "member1"}), recorded(SERVER)),
        "is not marked"
    )]
    #[case::another_member(
        secret(None, json!({CREDENTIAL_MEMBER_LABEL: "member2"}), recorded(SERVER)),
        "is marked as the credential of member \"member2\", not of member1"
    )]
    #[case::no_server(
        secret(None, marked(), Value::Null),
        "records no server for member member1"
    )]
    #[case::other_server(
        secret(None, marked(), recorded("https://127.0.0.1:7443")),
        "the client would send it to \"https://127.0.0.1:6443\", but Secret fleet/member1 \
         records \"https://127.0.0.1:7443\""
    )]
    #[case::trailing_slash(secret(None, marked(), recorded("https://127.0.0.1:6443/")), "records")]
    fn any_other_secret_is_refused(#[case] secret: Secret, #[case] says: &str) {
        let line = check(&secret, &request()).unwrap_err().one_line();
        assert!(line.contains(says), "{line}");
        assert!(!line.contains("s3cr3t"), "{line}");
    }

    #[test]
    fn an_empty_server_is_not_a_match_for_a_recorded_one() {
        let mut asked = request();
        asked.server = String::new();
        let err = check(&secret(None, marked(), recorded(SERVER)), &asked).unwrap_err();
        assert!(matches!(err, Error::ServerMismatch { .. }), "{err:?}");
    }
}
