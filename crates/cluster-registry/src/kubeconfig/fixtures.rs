//! Kubeconfigs for tests.

/// The server of [`kubeconfig`]'s cluster.
pub(crate) const SERVER: &str = "https://10.0.0.1:6443";

/// A kubeconfig whose current context names one cluster at [`SERVER`], with the `cluster`
/// lines added to it, and one user made of the `user` lines (each `key: value`, YAML).
pub(crate) fn kubeconfig(cluster: &[&str], user: &[&str]) -> String {
    let indent = |lines: &[&str]| {
        lines
            .iter()
            .map(|line| format!("    {line}\n"))
            .collect::<String>()
    };
    let user = if user.is_empty() {
        "  user: {}\n".to_owned()
    } else {
        format!("  user:\n{}", indent(user))
    };
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         contexts:\n- name: c\n  context: {{cluster: k, user: u}}\n\
         clusters:\n- name: k\n  cluster:\n    server: {SERVER}\n{}\
         users:\n- name: u\n{user}",
        indent(cluster)
    )
}
