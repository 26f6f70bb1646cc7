//! [`AccessReview`] answered by the control plane's kube-apiserver.

use std::fmt::Debug;

use k8s_openapi::{
    ClusterResourceScope,
    api::{
        authentication::v1::{TokenReview, TokenReviewSpec},
        authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
    },
};
use kube::{Api, Client, Resource, api::PostParams};
use secrecy::{ExposeSecret as _, SecretString};
use serde::{Serialize, de::DeserializeOwned};

use super::{AccessReview, ReviewError, User};

/// TokenReviews and SubjectAccessReviews created through the collector's own control-plane
/// client, which needs `create` on `tokenreviews` and `subjectaccessreviews`.
#[derive(Clone)]
pub(crate) struct KubeAccessReview {
    client: Client,
}

impl KubeAccessReview {
    /// Reviews through `client`.
    pub(crate) fn new(client: Client) -> Self {
        Self { client }
    }

    /// Creates the cluster-scoped review `object` (named `review` in errors): the answer is
    /// the object returned, with its status.
    async fn create<K>(&self, review: &'static str, object: &K) -> Result<K, ReviewError>
    where
        K: Resource<Scope = ClusterResourceScope> + Clone + DeserializeOwned + Serialize + Debug,
        K::DynamicType: Default,
    {
        Api::<K>::all(self.client.clone())
            .create(&PostParams::default(), object)
            .await
            .map_err(|source| ReviewError::Failed { review, source })
    }
}

#[async_trait::async_trait]
impl AccessReview for KubeAccessReview {
    async fn authenticate(&self, token: &SecretString) -> Result<Option<User>, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.expose_secret().to_owned(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer = self.create("TokenReview", &review).await?;
        let Some(status) = answer.status.filter(|s| s.authenticated == Some(true)) else {
            return Ok(None);
        };
        let info = status.user.unwrap_or_default();
        Ok(Some(User {
            name: info.username.unwrap_or_default(),
            uid: info.uid,
            groups: info.groups.unwrap_or_default(),
            extra: info.extra.unwrap_or_default(),
        }))
    }

    async fn authorize(&self, user: &User, path: &str) -> Result<bool, ReviewError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = self.create("SubjectAccessReview", &review).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}
