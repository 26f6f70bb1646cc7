//! The one request: GET the member's Secret from the control plane, as the caller.
//!
//! The caller's own identity is used (its kubeconfig, or its in-cluster ServiceAccount), so
//! RBAC decides: a caller reads exactly the Secrets it may `get`, and tether-credential holds
//! no credential of its own.

use std::path::Path;

use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

use crate::{
    error::{ApiStatus, Error, RequestFailure},
    exec_info::ExecRequest,
};

/// The caller's control-plane configuration: `kubeconfig` if given, else kube's inference
/// (`$KUBECONFIG` or `~/.kube/config`, else the in-cluster ServiceAccount).
///
/// # Errors
/// [`Error::Kubeconfig`] and [`Error::InferConfig`].
pub(crate) async fn caller_config(kubeconfig: Option<&Path>) -> Result<Config, Error> {
    let Some(path) = kubeconfig else {
        return Config::infer().await.map_err(Error::InferConfig);
    };
    let failed = |source| Error::Kubeconfig {
        path: path.to_owned(),
        source,
    };
    let file = Kubeconfig::read_from(path).map_err(failed)?;
    Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(failed)
}

/// GETs the Secret `request` names, with `config`'s identity.
///
/// # Errors
/// [`Error::Client`], and what the request met: [`Error::Forbidden`] (403),
/// [`Error::SecretGone`] (404), [`Error::Unauthorized`] (401), [`Error::Request`].
pub(crate) async fn get_secret(config: Config, request: &ExecRequest) -> Result<Secret, Error> {
    let client = Client::try_from(config).map_err(Error::Client)?;
    let secrets: Api<Secret> = Api::namespaced(client, &request.secret.namespace);
    secrets
        .get(&request.secret.name)
        .await
        .map_err(|err| classify(err, request))
}

fn classify(err: kube::Error, request: &ExecRequest) -> Error {
    let (member, secret) = (request.member.clone(), request.secret.clone());
    let source = match err {
        kube::Error::Api(status) => match status.code {
            401 => return Error::Unauthorized(ApiStatus(status)),
            403 => {
                return Error::Forbidden {
                    member,
                    secret,
                    source: ApiStatus(status),
                };
            }
            404 => return Error::SecretGone { member, secret },
            _ => RequestFailure::Status(ApiStatus(status)),
        },
        kube::Error::SerdeError(_) => RequestFailure::NotASecret,
        other => RequestFailure::Transport(other),
    };
    Error::Request { secret, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use member_client::{CredentialKey, exec::ExecApiVersion};
    use rstest::rstest;

    fn request() -> ExecRequest {
        ExecRequest {
            api_version: ExecApiVersion::V1,
            member: "m1".to_owned(),
            secret: CredentialKey::new("fleet", "m1-credential"),
            server: "https://127.0.0.2:6443".to_owned(),
        }
    }

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            message: format!("said with {code}"),
            ..Status::default()
        }))
    }

    #[rstest]
    #[case::unauthorized(401, "rejected the caller's own credential (401)")]
    #[case::forbidden(
        403,
        "may not get Secret fleet/m1-credential (member m1): it needs RBAC `get` on `secrets` \
         named m1-credential in namespace fleet"
    )]
    #[case::gone(404, "Secret fleet/m1-credential of member m1 is gone (404)")]
    #[case::other(
        500,
        "getting Secret fleet/m1-credential from the control plane: the apiserver said: said with 500"
    )]
    fn each_status_says_what_it_means(#[case] code: u16, #[case] says: &str) {
        let line = classify(api(code), &request()).one_line();
        assert!(line.contains(says), "{line}");
    }

    #[test]
    fn a_body_that_is_not_a_secret_is_not_quoted() {
        let serde = serde_json::from_str::<Secret>(r#"{"data": {"token": 7}}"#).unwrap_err();
        let line = classify(kube::Error::SerdeError(serde), &request()).one_line();
        assert!(
            line.ends_with("the apiserver's answer is not a Secret"),
            "{line}"
        );
    }
}
