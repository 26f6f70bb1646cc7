//! Label keys and selectors this crate reads. Secret data keys live with their parsers
//! (the `karmada` and `argocd` modules).

/// The label Argo CD puts on its cluster Secrets, with the value [`ARGOCD_SECRET_TYPE_CLUSTER`].
pub const ARGOCD_SECRET_TYPE: &str = "argocd.argoproj.io/secret-type";

/// The value of [`ARGOCD_SECRET_TYPE`] that marks a Secret as an Argo CD cluster definition.
pub const ARGOCD_SECRET_TYPE_CLUSTER: &str = "cluster";

/// The label selector that finds Argo CD cluster Secrets.
pub const ARGOCD_CLUSTER_SELECTOR: &str = "argocd.argoproj.io/secret-type=cluster";

/// Whether a Secret with these labels is an Argo CD cluster Secret.
pub fn is_argocd_cluster<'a>(mut labels: impl Iterator<Item = (&'a String, &'a String)>) -> bool {
    labels.any(|(k, v)| k == ARGOCD_SECRET_TYPE && v == ARGOCD_SECRET_TYPE_CLUSTER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn selector_matches_the_label_pair() {
        assert_eq!(
            ARGOCD_CLUSTER_SELECTOR,
            format!("{ARGOCD_SECRET_TYPE}={ARGOCD_SECRET_TYPE_CLUSTER}")
        );
    }

    #[test]
    fn only_the_cluster_value_marks_a_cluster_secret() {
        let labels = |v: &str| BTreeMap::from([(ARGOCD_SECRET_TYPE.to_owned(), v.to_owned())]);
        assert!(is_argocd_cluster(labels("cluster").iter()));
        assert!(!is_argocd_cluster(labels("repository").iter()));
        assert!(!is_argocd_cluster(BTreeMap::new().iter()));
    }
}
