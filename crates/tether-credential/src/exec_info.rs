//! The input: `KUBERNETES_EXEC_INFO`, the `ExecCredential` client-go hands a plugin, whose
//! `spec.cluster.config` is the cluster's `client.authentication.k8s.io/exec` extension.

use cluster_registry::{clusterprofile::TetherExecExtension, secret_credential};
use member_client::{
    CredentialKey,
    exec::ExecApiVersion,
    exec::wire::{ExecCluster, ExecInfo},
};

use crate::error::Error;

/// What one run is asked for: whose credential, where it is, and which version to answer in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExecRequest {
    /// The version the answer must carry: the one client-go sent.
    pub(crate) api_version: ExecApiVersion,
    /// The member's name, for messages.
    pub(crate) member: String,
    /// The Secret that holds the member's credential.
    pub(crate) secret: CredentialKey,
    /// `spec.cluster.server`: where client-go will send the credential.
    pub(crate) server: String,
}

/// Reads the request from the value of `KUBERNETES_EXEC_INFO` (`None` when unset).
///
/// # Errors
/// [`Error::NoExecInfo`], [`Error::ExecInfo`], [`Error::NoClusterInfo`],
/// [`Error::NoExtension`], [`Error::ExtensionInvalid`], [`Error::NoSecretRef`] and
/// [`Error::SecretRefInvalid`].
pub(crate) fn parse(raw: Option<&str>) -> Result<ExecRequest, Error> {
    let raw = raw
        .filter(|r| !r.trim().is_empty())
        .ok_or(Error::NoExecInfo)?;
    let info = ExecInfo::from_json(raw).map_err(Error::ExecInfo)?;
    let ExecCluster { server, config, .. } = info.cluster.ok_or(Error::NoClusterInfo)?;
    let config = config.filter(|c| !c.is_null()).ok_or(Error::NoExtension)?;
    let extension: TetherExecExtension =
        serde_json::from_value(config).map_err(Error::ExtensionInvalid)?;
    let member = extension.member;
    let reference = extension.secret_ref.ok_or_else(|| Error::NoSecretRef {
        member: member.clone(),
    })?;
    let secret =
        secret_credential::secret_ref(&reference).map_err(|source| Error::SecretRefInvalid {
            member: member.clone(),
            source: Box::new(source),
        })?;
    Ok(ExecRequest {
        api_version: info.api_version,
        member,
        secret,
        server,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use member_client::exec::wire::ExecInfoError;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn info(api_version: &str, cluster: Value) -> String {
        json!({
            "apiVersion": api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": false, "cluster": cluster},
        })
        .to_string()
    }

    fn cluster(config: Value) -> Value {
        json!({"server": "https://127.0.0.1:6443", "certificate-authority-data": "Y2E=",
               "config": config})
    }

    fn tether(member: &str) -> Value {
        json!({"member": member, "secretRef": {"namespace": "fleet", "name": "member1"}})
    }

    #[rstest]
    #[case::v1("client.authentication.k8s.io/v1", ExecApiVersion::V1)]
    #[case::v1beta1("client.authentication.k8s.io/v1beta1", ExecApiVersion::V1Beta1)]
    fn a_profile_extension_names_the_member_and_its_secret(
        #[case] api_version: &str,
        #[case] want: ExecApiVersion,
    ) {
        let request = parse(Some(&info(api_version, cluster(tether("m1"))))).unwrap();
        assert_eq!(
            request,
            ExecRequest {
                api_version: want,
                member: "m1".to_owned(),
                secret: CredentialKey::new("fleet", "member1"),
                server: "https://127.0.0.1:6443".to_owned(),
            }
        );
    }

    #[test]
    fn other_versions_are_refused() {
        let raw = info(
            "client.authentication.k8s.io/v1alpha1",
            cluster(tether("m1")),
        );
        let err = parse(Some(&raw)).unwrap_err();
        assert!(
            matches!(err, Error::ExecInfo(ExecInfoError::ApiVersion(_))),
            "{err:?}"
        );
        assert!(err.one_line().contains("v1alpha1"), "{}", err.one_line());
    }

    #[test]
    fn no_cluster_says_to_set_provide_cluster_info() {
        let raw = json!({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                         "spec": {"interactive": false}})
        .to_string();
        let err = parse(Some(&raw)).unwrap_err();
        assert!(matches!(err, Error::NoClusterInfo), "{err:?}");
        assert!(
            err.to_string().contains("provideClusterInfo: true"),
            "{err}"
        );
    }

    #[test]
    fn no_secret_ref_says_the_member_cannot_be_served() {
        let raw = info(
            "client.authentication.k8s.io/v1",
            cluster(json!({"member": "edge-1"})),
        );
        let err = parse(Some(&raw)).unwrap_err();
        assert!(
            matches!(&err, Error::NoSecretRef { member } if member == "edge-1"),
            "{err:?}"
        );
        assert_eq!(
            err.one_line(),
            "member edge-1's credential is not held in a control-plane Secret (a member file or \
             a plugin the collector runs); tether-credential cannot serve it"
        );
    }

    #[rstest]
    #[case::unset(None)]
    #[case::empty(Some(""))]
    fn unset_means_not_run_by_client_go(#[case] raw: Option<&str>) {
        assert!(matches!(parse(raw), Err(Error::NoExecInfo)));
    }

    #[rstest]
    #[case::not_json("{", "not an ExecCredential")]
    #[case::other_kind(r#"{"kind": "Pod"}"#, "kind \"Pod\"")]
    #[case::no_config(&info("client.authentication.k8s.io/v1", json!({"server": "https://x"})),
                      "no client.authentication.k8s.io/exec extension")]
    #[case::null_config(&info("client.authentication.k8s.io/v1", cluster(Value::Null)),
                        "no client.authentication.k8s.io/exec extension")]
    #[case::upstream_extension(&info("client.authentication.k8s.io/v1",
                                     cluster(json!({"clusterName": "m1"}))),
                               "not Tether's exec extension")]
    #[case::bad_secret_ref(&info("client.authentication.k8s.io/v1", cluster(json!(
        {"member": "m1", "secretRef": {"namespace": "fleet", "name": "../configmaps/x"}}))),
        "DNS-1123 subdomain")]
    fn unusable_input_says_what_is_wrong(#[case] raw: &str, #[case] says: &str) {
        let line = parse(Some(raw)).unwrap_err().one_line();
        assert!(line.contains(says), "{line}");
    }
}
