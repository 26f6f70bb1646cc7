//! The requests the check sends with the member's own client: who the member says the
//! credential is (SelfSubjectReview), what it may do (SelfSubjectAccessReview), and `/readyz`.

use k8s_openapi::api::{
    authentication::v1::SelfSubjectReview,
    authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec},
};
use kube::{Api, Client, api::PostParams};
use member_client::FailureKind;
use serde::Serialize;

use crate::{member::health::describe, mirror::MirroredResource};

/// Who the member says the credential is.
#[serde_with::skip_serializing_none]
#[derive(Debug, Default, Serialize)]
pub(crate) struct Whoami {
    /// The user name, once the review answered.
    pub(crate) user: Option<String>,
    /// The user's groups.
    pub(crate) groups: Vec<String>,
    /// Why the review gave no answer: the credential rejected (401), the review forbidden
    /// (403), or another failure. A 403 is never reported as a 401.
    pub(crate) error: Option<String>,
}

/// Whether the credential may list and watch one kind, cluster-wide, as the informers do.
#[derive(Debug, Serialize)]
pub(crate) struct Access {
    /// `group/version/resource`.
    pub(crate) resource: String,
    /// `list` allowed; `None` when the review failed.
    pub(crate) list: Option<bool>,
    /// `watch` allowed; `None` when the review failed.
    pub(crate) watch: Option<bool>,
    /// Why a review failed, or what the authorizer said of a denial.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

impl Access {
    /// Both verbs allowed.
    pub(crate) fn allowed(&self) -> bool {
        self.list == Some(true) && self.watch == Some(true)
    }
}

/// Asks the member who the credential is.
pub(crate) async fn whoami(client: &Client) -> Whoami {
    let api = Api::<SelfSubjectReview>::all(client.clone());
    match api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
    {
        Ok(review) => answered(review),
        Err(err) => Whoami {
            error: Some(failure(&err)),
            ..Whoami::default()
        },
    }
}

/// What the member's answer says, sanitized: the member writes the user name and groups, and
/// they are printed to a terminal. At most [`MAX_GROUPS`] groups are kept.
pub(crate) fn answered(review: SelfSubjectReview) -> Whoami {
    let info = review.status.and_then(|s| s.user_info).unwrap_or_default();
    let text = |raw: &str| String::from(member_client::text::Text::new(raw));
    Whoami {
        user: info.username.as_deref().map(text),
        groups: (info.groups.unwrap_or_default().iter())
            .take(MAX_GROUPS)
            .map(|group| text(group))
            .collect(),
        error: None,
    }
}

/// The most groups a report lists; a member may claim any number.
pub(crate) const MAX_GROUPS: usize = 64;

/// Asks the member whether the credential may `list` and `watch` `resource` in every
/// namespace.
pub(crate) async fn access(client: &Client, resource: &MirroredResource) -> Access {
    let (list, watch) = tokio::join!(
        review(client, resource, "list"),
        review(client, resource, "watch")
    );
    let mut errors = Vec::new();
    let mut verdict = |reviewed: Result<(bool, Option<String>), String>| match reviewed {
        Ok((allowed, why)) => {
            errors.extend(why);
            Some(allowed)
        }
        Err(err) => {
            errors.push(err);
            None
        }
    };
    let (list, watch) = (verdict(list), verdict(watch));
    errors.dedup();
    Access {
        resource: resource.to_string(),
        list,
        watch,
        error: (!errors.is_empty()).then(|| errors.join("; ")),
    }
}

/// One SelfSubjectAccessReview: whether `verb` is allowed, and the authorizer's reason for a
/// denial.
async fn review(
    client: &Client,
    resource: &MirroredResource,
    verb: &str,
) -> Result<(bool, Option<String>), String> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(resource.group.clone()),
                version: Some(resource.version.clone()),
                resource: Some(resource.resource.clone()),
                verb: Some(verb.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answered = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|err| failure(&err))?;
    let status = answered.status.unwrap_or_default();
    let why = (!status.allowed)
        .then(|| status.reason.filter(|r| !r.is_empty()))
        .flatten()
        .map(|r| member_client::text::Text::new(&r).into());
    Ok((status.allowed, why))
}

/// What `/readyz` answered.
#[derive(Debug, Serialize)]
pub(crate) struct Readyz {
    /// It answered 200.
    pub(crate) ok: bool,
    /// Its body (`ok`), or why it failed.
    pub(crate) detail: String,
}

impl Readyz {
    /// The body of a `/readyz` answer, sanitized, or the failure in a few words.
    pub(crate) fn of(answer: &Result<String, kube::Error>) -> Self {
        match answer {
            Ok(body) => Self {
                ok: true,
                detail: member_client::text::Text::new(body.trim()).into(),
            },
            Err(err) => Self {
                ok: false,
                detail: failure(err),
            },
        }
    }
}

/// `GET /readyz` with the member's client: the answer, or the error that the collector's
/// probe would classify.
pub(crate) async fn readyz(client: &Client) -> Result<String, kube::Error> {
    let request = http::Request::get("/readyz")
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    client.request_text(request).await
}

/// A failed review in a few words: 401 and 403 named as such, never one for the other.
pub(crate) fn failure(err: &kube::Error) -> String {
    match FailureKind::of(err) {
        FailureKind::Unauthorized => "credential rejected (401)".to_owned(),
        FailureKind::Forbidden => format!("forbidden (403): {}", describe(err)),
        _ => describe(err),
    }
}
