//! Which member a Secret serves: a Secret is bound to exactly one member, and only that
//! member's definition may use its credential.
//!
//! Whoever may write a Karmada `Cluster` chooses its `secretRef`, and so could otherwise name
//! another member's Secret and send that member's token to an endpoint of their own. The rule
//! below decides from the Secret alone (its label, owners and name) and the member's name, so
//! the answer is the same after a restart and whatever order the objects were listed in:
//!
//! 1. a Secret labelled [`MEMBER_LABEL`]` = N` serves member `N`, and no other;
//! 2. else a Secret with an ownerReference to the Karmada `Cluster` `N` (as `karmadactl join`
//!    and `karmada-agent` set it) serves member `N`; owned by several Clusters, it serves none;
//! 3. else a Secret serves the member of its own name (`karmadactl join` names it after the
//!    Cluster).
//!
//! Sources whose definition *is* the Secret (Argo CD, kubeconfig Secrets) or whose credential is
//! stored under the definition's own key (member files, `ClusterProfile`s) are bound by
//! construction; the member table holds them to their own key.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;
use member_client::{CredentialKey, text::Text};

use crate::InvalidReason;

/// The label that binds a Secret to one member: `tether.io/member: <member name>`. It wins over
/// the Secret's owners and name, and also marks the Secret as that member's credential for
/// `tether-credential`.
///
/// A Secret serves exactly one member, and only that member's definition may use its
/// credential: labelled with this label it serves the member named; else, owned by a Karmada
/// `Cluster` (as `karmadactl join` and `karmada-agent` set it), that Cluster's member (owned by
/// several, none); else the member of its own name. A member that names a Secret bound to
/// another is [`SecretForbidden`](crate::InvalidReason::SecretForbidden). Argo CD and kubeconfig
/// Secrets, member files and `ClusterProfile`s define the member they serve.
///
/// ```yaml
/// apiVersion: v1
/// kind: Secret
/// metadata:
///   name: prod-eu-1-token
///   namespace: karmada-cluster
///   labels:
///     tether.io/member: prod-eu-1
/// ```
pub const MEMBER_LABEL: &str = "tether.io/member";

/// The API group of the Karmada `Cluster` an ownerReference must name to bind a Secret.
const KARMADA_CLUSTER_GROUP: &str = "cluster.karmada.io";

/// What of a Secret decides which member it serves. Two Secrets with the same binding and
/// the same name serve the same member.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SecretBinding {
    /// The value of [`MEMBER_LABEL`], if the Secret has it.
    label: Option<String>,
    /// The names of the Karmada `Cluster`s among the Secret's ownerReferences.
    cluster_owners: BTreeSet<String>,
}

impl SecretBinding {
    /// The binding of `secret`, read from its metadata.
    pub(crate) fn of(secret: &Secret) -> Self {
        Self {
            label: secret.labels().get(MEMBER_LABEL).cloned(),
            cluster_owners: (secret.owner_references().iter())
                .filter(|owner| {
                    owner.kind == "Cluster"
                        && owner.api_version.split('/').next() == Some(KARMADA_CLUSTER_GROUP)
                })
                .map(|owner| owner.name.clone())
                .collect(),
        }
    }

    /// A binding by label only, for tests.
    #[cfg(test)]
    pub(crate) fn labelled(member: &str) -> Self {
        Self {
            label: Some(member.to_owned()),
            cluster_owners: BTreeSet::new(),
        }
    }

    /// Whether the Secret stored under `key` serves `member`.
    ///
    /// # Errors
    /// [`InvalidReason::SecretForbidden`] naming the Secret, the rule that binds it elsewhere
    /// (or to nothing), and how to bind it to `member`.
    pub(crate) fn serves(&self, key: &CredentialKey, member: &str) -> Result<(), InvalidReason> {
        let refused = |why: String| {
            InvalidReason::SecretForbidden(format!(
                "Secret {} {why}; a Secret serves one member only. To let member {} use it, \
                 label it {MEMBER_LABEL}={}",
                Text::new(&key.to_string()).as_str(),
                Text::new(member).as_str(),
                Text::new(member).as_str(),
            ))
        };
        if let Some(bound) = &self.label {
            if bound == member {
                return Ok(());
            }
            return Err(refused(format!(
                "is bound to member {:?} by its label {MEMBER_LABEL}",
                Text::new(bound).as_str()
            )));
        }
        let mut owners = self.cluster_owners.iter();
        match (owners.next(), owners.next()) {
            (Some(owner), None) if owner == member => Ok(()),
            (Some(owner), None) => Err(refused(format!(
                "is owned by Karmada Cluster {:?} (ownerReference), so it serves that member",
                Text::new(owner).as_str()
            ))),
            (Some(_), Some(_)) => Err(refused(format!(
                "is owned by {} Karmada Clusters (ownerReferences), so it serves none of them",
                self.cluster_owners.len()
            ))),
            (None, _) if key.name == member => Ok(()),
            (None, _) => Err(refused(format!(
                "is not bound to this member: it has no {MEMBER_LABEL} label and no Karmada \
                 Cluster owner, so it serves only the member of its own name, {:?}",
                Text::new(&key.name).as_str()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use rstest::rstest;
    use std::collections::BTreeMap;

    fn owner(api_version: &str, kind: &str, name: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            ..OwnerReference::default()
        }
    }

    fn karmada(name: &str) -> OwnerReference {
        owner("cluster.karmada.io/v1alpha1", "Cluster", name)
    }

    fn secret(label: Option<&str>, owners: Vec<OwnerReference>) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("member1".into()),
                namespace: Some("karmada-cluster".into()),
                labels: label.map(|l| BTreeMap::from([(MEMBER_LABEL.to_owned(), l.to_owned())])),
                owner_references: Some(owners),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        }
    }

    /// Which of `member1`, `evil` and `member2` the Secret `karmada-cluster/member1` serves.
    fn served(secret: &Secret) -> Vec<&'static str> {
        let key = CredentialKey::new("karmada-cluster", "member1");
        let binding = SecretBinding::of(secret);
        ["member1", "evil", "member2"]
            .into_iter()
            .filter(|m| binding.serves(&key, m).is_ok())
            .collect()
    }

    #[rstest]
    #[case::name_match(None, vec![], vec!["member1"])]
    #[case::label_match(Some("member2"), vec![], vec!["member2"])]
    #[case::label_wins_over_name(Some("member2"), vec![karmada("member1")], vec!["member2"])]
    #[case::label_of_its_own_name(Some("member1"), vec![], vec!["member1"])]
    #[case::empty_label_serves_none(Some(""), vec![], vec![])]
    #[case::owner_match(None, vec![karmada("member2")], vec!["member2"])]
    #[case::owner_wins_over_name(None, vec![karmada("evil")], vec!["evil"])]
    #[case::karmada_join(None, vec![karmada("member1")], vec!["member1"])]
    #[case::two_owners_serve_none(None, vec![karmada("member1"), karmada("evil")], vec![])]
    #[case::owner_of_another_group_is_ignored(
        None,
        vec![owner("cluster.x-k8s.io/v1beta1", "Cluster", "evil")],
        vec!["member1"]
    )]
    #[case::owner_of_another_kind_is_ignored(
        None,
        vec![owner("cluster.karmada.io/v1alpha1", "ClusterSet", "evil")],
        vec!["member1"]
    )]
    fn a_secret_serves_exactly_the_member_the_rule_names(
        #[case] label: Option<&str>,
        #[case] owners: Vec<OwnerReference>,
        #[case] want: Vec<&str>,
    ) {
        assert_eq!(served(&secret(label, owners)), want);
    }

    #[rstest]
    #[case::label_other_member(
        Some("member2"),
        "member1",
        "bound to member \"member2\" by its label"
    )]
    #[case::owner_other_member(None, "evil", "owned by Karmada Cluster \"member1\"")]
    fn a_refusal_names_the_secret_the_rule_and_the_fix(
        #[case] label: Option<&str>,
        #[case] member: &str,
        #[case] rule: &str,
    ) {
        let owners = vec![karmada("member1")];
        let key = CredentialKey::new("karmada-cluster", "member1");
        let err = SecretBinding::of(&secret(label, owners))
            .serves(&key, member)
            .unwrap_err();
        assert_eq!(err.condition_reason(), "SecretForbidden");
        let detail = err.to_string();
        for says in [
            "Secret karmada-cluster/member1 ",
            rule,
            &format!("label it tether.io/member={member}"),
        ] {
            assert!(detail.contains(says), "{detail:?} lacks {says:?}");
        }
    }

    #[test]
    fn a_secret_of_another_name_is_refused_in_words() {
        let key = CredentialKey::new("karmada-cluster", "shared");
        let err = SecretBinding::default().serves(&key, "evil").unwrap_err();
        assert_eq!(
            err.to_string(),
            "SecretForbidden: Secret karmada-cluster/shared is not bound to this member: it \
             has no tether.io/member label and no Karmada Cluster owner, so it serves only the \
             member of its own name, \"shared\"; a Secret serves one member only. To let \
             member evil use it, label it tether.io/member=evil"
        );
    }

    #[test]
    fn hostile_text_in_a_label_stays_on_one_line() {
        let binding = SecretBinding::labelled("a\nb\u{202e}");
        let key = CredentialKey::new("karmada-cluster", "member1");
        let detail = binding.serves(&key, "member1").unwrap_err().to_string();
        assert!(
            !detail.contains('\n') && !detail.contains('\u{202e}'),
            "{detail:?}"
        );
    }
}
