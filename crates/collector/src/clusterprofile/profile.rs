//! The `ClusterProfile` Tether publishes for one member, built from what the collector knows
//! of it: a pure function, so what is written is decided here and tested without a cluster.

use cluster_registry::clusterprofile::{
    AccessProvider, CLUSTER_MANAGER_LABEL, CONTROL_PLANE_HEALTHY, ClusterManager, ClusterProfile,
    ClusterProfileSpec, ClusterProfileStatus, EXEC_EXTENSION, NamedExtension, ProfileCluster,
    ProfileVersion, TETHER_CLUSTER_MANAGER, TetherExecExtension,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::access::ProfileAccess;
use crate::member::status::{MemberStatus, READY_CONDITION};

/// The profile of `member` in `namespace`: Tether's label and cluster manager, the member's
/// version, `ControlPlaneHealthy` (the member's `Ready`) and `CredentialsValid`, and, when its
/// definition is usable (`access`), the `tether` access provider.
pub(crate) fn build(
    namespace: &str,
    member: &str,
    access: Option<&ProfileAccess>,
    status: &MemberStatus,
) -> ClusterProfile {
    let mut profile = ClusterProfile::new(
        member,
        ClusterProfileSpec {
            display_name: Some(member.to_owned()),
            cluster_manager: ClusterManager {
                name: TETHER_CLUSTER_MANAGER.to_owned(),
            },
        },
    );
    profile.metadata.namespace = Some(namespace.to_owned());
    profile.metadata.labels = Some(
        [(
            CLUSTER_MANAGER_LABEL.to_owned(),
            TETHER_CLUSTER_MANAGER.to_owned(),
        )]
        .into(),
    );
    profile.status = Some(ClusterProfileStatus {
        conditions: status
            .conditions()
            .into_iter()
            .map(profile_condition)
            .collect(),
        version: status.kubernetes_version().map(|version| ProfileVersion {
            kubernetes: Some(version.to_owned()),
        }),
        access_providers: access
            .map(|access| access_provider(member, access))
            .into_iter()
            .collect(),
        ..ClusterProfileStatus::default()
    });
    profile
}

/// A member condition as the profile states it: `Ready` is what SIG-Multicluster calls
/// `ControlPlaneHealthy` (same status, reason, message and transition time); the others keep
/// their type.
fn profile_condition(condition: Condition) -> Condition {
    if condition.type_ == READY_CONDITION {
        Condition {
            type_: CONTROL_PLANE_HEALTHY.to_owned(),
            ..condition
        }
    } else {
        condition
    }
}

/// The `tether` access provider: the member's kubeconfig `Cluster`, whose exec extension tells
/// `tether-credential` which member it is and which Secret holds its credential.
fn access_provider(member: &str, access: &ProfileAccess) -> AccessProvider {
    let exec = TetherExecExtension {
        member: member.to_owned(),
        secret_ref: access.secret_ref.clone(),
    };
    AccessProvider {
        name: TETHER_CLUSTER_MANAGER.to_owned(),
        cluster: ProfileCluster {
            server: access.server.clone(),
            tls_server_name: access.tls_server_name.clone(),
            certificate_authority_data: access.certificate_authority_data.clone(),
            proxy_url: access.proxy_url.clone(),
            extensions: vec![NamedExtension {
                name: EXEC_EXTENSION.to_owned(),
                // Strings only: serializing it cannot fail.
                extension: serde_json::to_value(exec).unwrap_or_default(),
            }],
            ..ProfileCluster::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::health::MemberHealth;
    use cluster_registry::{InvalidReason, MemberSpec};
    use member_client::{CredentialKey, validation::MemberEndpoint};
    use serde_json::json;

    fn access(secret_ref: CredentialKey) -> ProfileAccess {
        let spec = MemberSpec {
            name: "member1".into(),
            endpoint: MemberEndpoint {
                url: "https://10.0.0.1:6443".into(),
                insecure_skip_tls_verify: false,
                proxy_url: None,
                tls_server_name: Some("api.member1".into()),
            },
            secret_ref,
            federation: None,
            mint_request: None,
        };
        ProfileAccess::of(&spec, Some(b"-----BEGIN CERTIFICATE-----\n"))
    }

    /// The profile of a healthy member1 whose credential is `secret_ref`.
    fn healthy_member1(secret_ref: CredentialKey) -> ClusterProfile {
        let status = MemberStatus::with_health(MemberHealth::Healthy);
        build("fleet", "member1", Some(&access(secret_ref)), &status)
    }

    fn condition<'a>(profile: &'a ClusterProfile, type_: &str) -> &'a Condition {
        let status = profile.status.as_ref().unwrap();
        status.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    /// The status and reason of `profile`'s condition `type_`, as `<status> <reason>`.
    fn said(profile: &ClusterProfile, type_: &str) -> String {
        let condition = condition(profile, type_);
        format!("{} {}", condition.status, condition.reason)
    }

    #[test]
    fn a_profile_is_tethers_named_after_the_member_with_its_version() {
        let mut status = MemberStatus::with_health(MemberHealth::Healthy);
        status.set_kubernetes_version("v1.36.5".into());
        let karmada = access(CredentialKey::new("karmada-cluster", "member1"));
        let profile = build("fleet", "member1", Some(&karmada), &status);
        let written = serde_json::to_value(&profile).unwrap();
        assert_eq!(written["apiVersion"], "multicluster.x-k8s.io/v1alpha1");
        assert_eq!(written["kind"], "ClusterProfile");
        assert_eq!(
            written["metadata"],
            json!({"name": "member1", "namespace": "fleet",
                   "labels": {"x-k8s.io/cluster-manager": "tether"}})
        );
        assert_eq!(
            written["spec"],
            json!({"displayName": "member1", "clusterManager": {"name": "tether"}})
        );
        assert_eq!(
            written["status"]["version"],
            json!({"kubernetes": "v1.36.5"})
        );
    }

    #[test]
    fn control_plane_healthy_follows_ready_and_credentials_valid_is_the_collectors() {
        for health in [
            MemberHealth::Healthy,
            MemberHealth::Unauthorized,
            MemberHealth::Unreachable("connection refused".into()),
            MemberHealth::Syncing,
            MemberHealth::Invalid(InvalidReason::SecretNotFound),
        ] {
            let status = MemberStatus::with_health(health.clone());
            let profile = build("fleet", "member1", None, &status);
            let member = status.conditions();
            let healthy = condition(&profile, CONTROL_PLANE_HEALTHY);
            assert_eq!(
                (healthy.status.as_str(), healthy.reason.as_str()),
                (health.ready_status(), health.reason()),
                "{health:?}"
            );
            assert_eq!(healthy.message, member[0].message);
            assert_eq!(healthy.last_transition_time, member[0].last_transition_time);
            let credentials = condition(&profile, "CredentialsValid");
            assert_eq!(credentials, &member[1], "{health:?}");
            let conditions = &profile.status.as_ref().unwrap().conditions;
            assert_eq!(conditions.len(), 2, "no Ready beside ControlPlaneHealthy");
        }
        let status = MemberStatus::with_health(MemberHealth::Healthy);
        let healthy = build("fleet", "m", None, &status);
        let credentials = said(&healthy, "CredentialsValid");
        assert_eq!(credentials, "True CredentialsAccepted");
    }

    #[test]
    fn the_tether_access_provider_names_the_server_the_ca_and_the_secret() {
        let profile = healthy_member1(CredentialKey::new("karmada-cluster", "member1"));
        let written = serde_json::to_value(&profile).unwrap();
        assert_eq!(
            written["status"]["accessProviders"],
            json!([{"name": "tether", "cluster": {
                "server": "https://10.0.0.1:6443",
                "tls-server-name": "api.member1",
                "certificate-authority-data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
                "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {
                    "member": "member1",
                    "secretRef": {"namespace": "karmada-cluster", "name": "member1"},
                }}],
            }}])
        );
        let cluster = &written["status"]["accessProviders"][0]["cluster"];
        let extension = cluster["extensions"][0]["extension"].clone();
        let read: TetherExecExtension = serde_json::from_value(extension).unwrap();
        assert_eq!(read.member, "member1");
    }

    #[test]
    fn a_file_member_is_published_without_a_secret() {
        let profile = healthy_member1(CredentialKey::new("", "/etc/tether/members/member1.yaml"));
        let cluster = &profile.status.unwrap().access_providers[0].cluster;
        let extension = cluster.extension(EXEC_EXTENSION);
        assert_eq!(extension, Some(&json!({"member": "member1"})));
    }

    #[test]
    fn a_member_without_a_usable_definition_has_no_access_provider() {
        let reason = InvalidReason::EndpointForbidden("loopback".into());
        let status = MemberStatus::with_health(MemberHealth::Invalid(reason));
        let profile = build("fleet", "m", None, &status);
        let healthy = said(&profile, CONTROL_PLANE_HEALTHY);
        assert_eq!(healthy, "False EndpointForbidden");
        let status = profile.status.unwrap();
        assert!(status.access_providers.is_empty());
        assert_eq!(status.version, None, "no version before /version answered");
    }
}
