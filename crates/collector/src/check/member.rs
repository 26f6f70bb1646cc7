//! One member's check: its definition from the registry, its credential, and the requests its
//! own client sends, judged into the reason the collector would give.

use std::{sync::Arc, time::Duration};

use cluster_registry::{InvalidReason, MemberState, Registry};
use member_client::{ClientFactory, ClientLimits, CredentialHealth, CredentialKey};

use super::{
    credential::CredentialSummary,
    probe::{self, Access, Readyz},
    remedy::{self, NOT_DEFINED, PENDING},
    report::MemberReport,
    tls,
};
use crate::{member::health::MemberHealth, mirror::MirroredResource};

/// What checking a member needs; shared by the concurrent checks of all members.
pub(crate) struct Checker {
    /// The registry the flags built, listed.
    pub(crate) registry: Registry,
    /// Builds member clients exactly as the collector's supervisor does; its policy says
    /// where they may connect, and the TLS handshake dials nothing else.
    pub(crate) factory: ClientFactory,
    /// The mirrored kinds and nodes, whose `list` and `watch` are reviewed.
    pub(crate) resources: Arc<[MirroredResource]>,
    /// `--request-timeout` and the member response limits, as in the collector.
    pub(crate) client_limits: ClientLimits,
    /// The most one member's checks may take.
    pub(crate) deadline: Duration,
}

impl Checker {
    /// Checks member `name`.
    pub(crate) async fn check(&self, name: &str) -> MemberReport {
        let mut report = MemberReport {
            name: name.to_owned(),
            ..MemberReport::default()
        };
        let Some(state) = self.registry.state(name) else {
            return concluded(report, NOT_DEFINED, "no source defines this member".into());
        };
        if let Some(origin) = self.registry.origin(name) {
            report.source = Some(origin.kind().as_str());
            report.definition = Some(origin.to_string());
        }
        let spec = match (state, self.registry.spec(name)) {
            (MemberState::Invalid { reason }, _) => {
                return judged(report, &MemberHealth::Invalid(reason));
            }
            (MemberState::Ready, Some(spec)) => spec,
            _ => {
                let why = "its definition waits for the Secrets of its namespace to be listed";
                return concluded(report, PENDING, why.into());
            }
        };
        report.endpoint = Some(spec.endpoint.url.clone());
        let stored = self.registry.secrets().get(&spec.secret_ref);
        // A federated member's CA is in its definition: no Secret carries one.
        let ca_bundle = match &spec.federation {
            Some(federation) => federation.ca_bundle.clone(),
            None => stored.as_ref().and_then(|s| s.ca_bundle().cloned()),
        };
        let from = credential_origin(
            &spec.secret_ref,
            stored.as_ref().and_then(|s| s.exec_command()),
        );
        let mut config = spec.client_config(ca_bundle);
        config.limits = self.client_limits;
        let client = match self.factory.build(&config, &CredentialHealth::new()) {
            Ok(client) => client,
            Err(err) => {
                let reason = InvalidReason::of_build_error(err);
                return judged(report, &MemberHealth::Invalid(reason));
            }
        };
        let checks = async {
            let credential = async {
                match self.registry.tokens().get(&spec.secret_ref).await {
                    Ok(credential) => CredentialSummary::of(
                        from.clone(),
                        &credential,
                        std::time::SystemTime::now(),
                    ),
                    Err(err) => CredentialSummary {
                        from: from.clone(),
                        error: Some(err.to_string()),
                        ..CredentialSummary::default()
                    },
                }
            };
            let access = futures::future::join_all(
                self.resources
                    .iter()
                    .map(|resource| probe::access(&client, resource)),
            );
            tokio::join!(
                credential,
                probe::whoami(&client),
                access,
                probe::readyz(&client),
                tls::probe(&config, self.factory.policy()),
            )
        };
        let Ok((credential, whoami, access, readyz, tls)) =
            tokio::time::timeout(self.deadline, checks).await
        else {
            let why = format!("its checks did not finish within {:?}", self.deadline);
            return judged(report, &MemberHealth::Unreachable(why));
        };
        let health = judge(&readyz, &access);
        report.credential = Some(credential);
        report.whoami = Some(whoami);
        report.access = access;
        report.readyz = Some(Readyz::of(&readyz));
        report.tls = Some(tls);
        let report = judged(report, &health);
        match spec.federation {
            Some(_) => federated(report),
            None => report,
        }
    }
}

/// What to do when a federated member rejects the control plane's token: the steps a 401
/// leaves open are the member's, not a stored credential's.
const FEDERATED_REJECTED: &str = "the member rejects the control plane's token for its \
    audience (--federated-audience-prefix followed by the member's name): its \
    AuthenticationConfiguration must trust the control plane's issuer (issuer.url equal to \
    the control plane's --service-account-issuer) with that audience, and the member must \
    reach the issuer's discovery document and keys (issuer.discoveryURL and \
    certificateAuthority); see docs/src/credentials/federated.md";

/// `report` of a federated member: a mint refused says `FederationFailed` already, and a
/// rejection gets the member-side steps as its remedy.
fn federated(report: MemberReport) -> MemberReport {
    match report.reason.as_str() {
        "Unauthorized" => MemberReport {
            remedy: FEDERATED_REJECTED,
            ..report
        },
        _ => report,
    }
}

/// The health the collector would report: `/readyz` decides as in its probe, then the
/// informers' access, here as reviewed rather than tried.
pub(crate) fn judge(readyz: &Result<String, kube::Error>, access: &[Access]) -> MemberHealth {
    if let Err(err) = readyz {
        return MemberHealth::from_error(err);
    }
    let denied = access.iter().find_map(|a| {
        let verb = match (a.list, a.watch) {
            (Some(false), _) => "list",
            (_, Some(false)) => "watch",
            _ => return None,
        };
        Some(format!("may not {verb} {}", a.resource))
    });
    if let Some(what) = denied {
        return MemberHealth::Forbidden(what);
    }
    if let Some(unknown) = access.iter().find(|a| !a.allowed()) {
        let why = unknown.error.as_deref().unwrap_or("no answer");
        return MemberHealth::MirrorFailing(format!(
            "cannot review access to {}: {why}",
            unknown.resource
        ));
    }
    MemberHealth::Healthy
}

/// Where a credential comes from, in words: an exec plugin's command (never its
/// environment), a Secret, or a member file's files.
pub(crate) fn credential_origin(key: &CredentialKey, exec_command: Option<&str>) -> String {
    if key.federated_member().is_some() {
        return "a TokenRequest on the control plane (federated)".to_owned();
    }
    let holder = if key.namespace.starts_with("clusterprofile:") {
        "the provider file".to_owned()
    } else if key.namespace.is_empty() {
        format!("member file {}", key.name)
    } else {
        format!("Secret {key}")
    };
    match exec_command {
        Some(command) => format!("exec plugin {command} (named by {holder})"),
        None if key.namespace.is_empty() => format!("the files named by {holder}"),
        None => holder,
    }
}

fn judged(report: MemberReport, health: &MemberHealth) -> MemberReport {
    let usable = *health == MemberHealth::Healthy;
    MemberReport {
        usable,
        ..concluded(report, health.reason(), health.message())
    }
}

fn concluded(report: MemberReport, reason: &str, message: String) -> MemberReport {
    MemberReport {
        reason: reason.to_owned(),
        remedy: remedy::remedy(reason),
        message,
        usable: false,
        ..report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::health::tests::api;
    use rstest::rstest;

    fn access(list: Option<bool>, watch: Option<bool>) -> Access {
        Access {
            resource: "apps/v1/deployments".into(),
            list,
            watch,
            error: None,
        }
    }

    #[rstest]
    #[case::all_allowed(Ok("ok".into()), vec![access(Some(true), Some(true))], "MemberReady")]
    #[case::watch_denied(Ok("ok".into()), vec![access(Some(true), Some(false))], "Forbidden")]
    #[case::review_failed(Ok("ok".into()), vec![access(None, None)], "MirrorFailing")]
    #[case::rejected(Err(api(401)), vec![access(None, None)], "Unauthorized")]
    #[case::readyz_forbidden_is_not_a_401(Err(api(403)), vec![], "Forbidden")]
    #[case::server_error(Err(api(500)), vec![], "Unreachable")]
    fn the_reason_is_the_collectors(
        #[case] readyz: Result<String, kube::Error>,
        #[case] access: Vec<Access>,
        #[case] reason: &str,
    ) {
        assert_eq!(judge(&readyz, &access).reason(), reason);
    }

    #[test]
    fn a_denial_names_the_verb_and_the_kind() {
        let health = judge(&Ok("ok".into()), &[access(Some(false), Some(false))]);
        assert!(
            health
                .message()
                .contains("may not list apps/v1/deployments")
        );
    }

    #[rstest]
    #[case::rejected("Unauthorized", FEDERATED_REJECTED)]
    #[case::mint_refused("FederationFailed", remedy::remedy("FederationFailed"))]
    #[case::forbidden("Forbidden", remedy::remedy("Forbidden"))]
    fn a_federated_rejection_points_at_the_members_trust(#[case] reason: &str, #[case] want: &str) {
        let report = concluded(MemberReport::default(), reason, String::new());
        assert_eq!(federated(report).remedy, want);
    }

    #[rstest]
    #[case::federated(
        CredentialKey::federated("m1"),
        None,
        "a TokenRequest on the control plane (federated)"
    )]
    #[case::karmada(
        CredentialKey::new("karmada-cluster", "m1"),
        None,
        "Secret karmada-cluster/m1"
    )]
    #[case::files(
        CredentialKey::new("", "/etc/m/m1.yaml"),
        None,
        "the files named by member file /etc/m/m1.yaml"
    )]
    #[case::exec_in_a_secret(
        CredentialKey::new("fleet", "wl1"),
        Some("/bin/aws"),
        "exec plugin /bin/aws (named by Secret fleet/wl1)"
    )]
    #[case::profile(
        CredentialKey::new("clusterprofile:inv", "c1"),
        Some("/bin/p"),
        "exec plugin /bin/p (named by the provider file)"
    )]
    fn the_credential_origin_says_where(
        #[case] key: CredentialKey,
        #[case] exec: Option<&str>,
        #[case] want: &str,
    ) {
        assert_eq!(credential_origin(&key, exec), want);
    }
}
