//! The RFC 1123 name rules of Kubernetes objects. A name that passes them can become a metric
//! label, a log field, an Event's subject or a Secret reference without escaping.
//!
//! Public for the collector, which checks its namespace flags and Lease names by the rules the
//! registry checks Secret references and ServiceAccounts by.

/// Whether `name` is an RFC 1123 subdomain, as most object names must be: labels of
/// lower-case alphanumerics and `-`, each at most 63 characters and starting and ending
/// alphanumeric, joined by `.`, at most 253 characters in all.
pub fn is_dns1123_subdomain(name: &str) -> bool {
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= 63
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            && bytes.first() != Some(&b'-')
            && bytes.last() != Some(&b'-')
    };
    name.len() <= 253 && name.split('.').all(label_ok)
}

/// Whether `name` is an RFC 1123 label, as a namespace name must be: one label of a subdomain.
pub fn is_dns1123_label(name: &str) -> bool {
    !name.contains('.') && is_dns1123_subdomain(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_and_labels() {
        for name in ["a", "a-1", "fleet", "a.b", "member-1.example"] {
            assert!(is_dns1123_subdomain(name), "{name:?}");
            assert_eq!(is_dns1123_label(name), !name.contains('.'), "{name:?}");
        }
        let too_long = ["a".repeat(64), "a".repeat(254)];
        let malformed = ["", "-a", "a-", "a..b", "a_b", "é", "Fleet"];
        for name in malformed
            .into_iter()
            .chain(too_long.iter().map(String::as_str))
        {
            assert!(!is_dns1123_subdomain(name), "{name:?}");
            assert!(!is_dns1123_label(name), "{name:?}");
        }
    }
}
