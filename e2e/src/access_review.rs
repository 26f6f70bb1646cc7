//! What the apiserver's own RBAC authorizer lets the collector's ServiceAccount (and readers of
//! its API) do, asked with SubjectAccessReviews.

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::{Api, Client, api::PostParams};

use crate::rbac_grants::COLLECTOR_SA;

/// A request by the collector's ServiceAccount: (namespace, group, resource, subresource,
/// name, verb).
pub type Request = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// Whether the apiserver's authorizer allows `request` to the collector's ServiceAccount (a
/// SubjectAccessReview).
pub async fn allowed(client: &Client, request: Request) -> anyhow::Result<bool> {
    let (namespace, group, resource, subresource, name, verb) = request;
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let (sa_ns, sa) = COLLECTOR_SA;
    ask(
        client,
        SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{sa_ns}:{sa}")),
            groups: Some(vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{sa_ns}"),
                "system:authenticated".to_owned(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                namespace: some(namespace),
                group: Some(group.to_owned()),
                resource: some(resource),
                subresource: some(subresource),
                name: some(name),
                verb: some(verb),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
    )
    .await
}

/// Whether the apiserver's authorizer lets `user` (in group `system:authenticated`) `get` the
/// non-resource URL `path`: what the collector asks for each reader of its API.
pub async fn allowed_url(client: &Client, user: &str, path: &str) -> anyhow::Result<bool> {
    ask(
        client,
        SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(vec!["system:authenticated".to_owned()]),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_owned()),
                verb: Some("get".to_owned()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
    )
    .await
}

/// Creates a SubjectAccessReview of `spec` and returns whether it is allowed.
async fn ask(client: &Client, spec: SubjectAccessReviewSpec) -> anyhow::Result<bool> {
    let review = SubjectAccessReview {
        spec,
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}
