//! [`EndpointPolicy`]: where a member's token may be sent.
//!
//! Whoever writes a member definition picks the host its Secret's token is sent to. Without a
//! policy, a `Cluster` pointing at `169.254.169.254` would hand the token (and the answer) to
//! the node's cloud metadata service, and one pointing at `127.0.0.1` to whatever listens
//! beside the collector.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{Cidr, ValidationError};

/// Host names of cloud metadata services, refused whatever they resolve to.
const METADATA_HOSTS: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "metadata.azure.internal",
    "instance-data",
    "instance-data.ec2.internal",
];

/// Metadata addresses outside link-local: `169.254.169.254` (AWS, GCP, Azure IMDS, Oracle,
/// OpenStack) is link-local already; these are not.
const METADATA_ADDRS: &[IpAddr] = &[
    // AWS's IPv6 instance metadata.
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    // GCP's IPv6 metadata server.
    IpAddr::V6(Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254)),
    // Alibaba Cloud's metadata.
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    // Azure's WireServer: hands out the VM's extension settings and certificates.
    IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
];

/// Which endpoints a member's token may go to.
///
/// The default refuses loopback, link-local (`169.254.0.0/16`, `fe80::/10`), unspecified,
/// multicast and broadcast addresses and the cloud metadata services (by address and by name),
/// `http://` endpoints, and members that skip TLS verification. Ranges given to
/// [`allow`](Self::allow) (the collector's `--allow-endpoint`) are accepted whatever class they
/// fall in. In [`strict`](Self::strict) mode those ranges are the whole allow-list: every
/// address outside them is refused, whatever its class. [`check_uri`](Self::check_uri) judges the URL as written;
/// [`check_ip`](Self::check_ip) judges each address a host name resolves to, before it is
/// dialled.
///
/// ```
/// use member_client::validation::EndpointPolicy;
///
/// let default = EndpointPolicy::default();
/// assert!(default.check_uri(&"https://10.0.0.1:6443".parse().unwrap()).is_ok());
/// assert!(default.check_uri(&"https://169.254.169.254".parse().unwrap()).is_err());
/// assert!(default.check_uri(&"https://127.0.0.1:6443".parse().unwrap()).is_err());
///
/// let tests = EndpointPolicy::default().allow("127.0.0.1/32".parse().unwrap());
/// assert!(tests.check_uri(&"https://127.0.0.1:6443".parse().unwrap()).is_ok());
///
/// let strict = EndpointPolicy::default().allow("10.1.0.0/16".parse().unwrap()).strict(true);
/// assert!(strict.check_uri(&"https://10.1.0.1:6443".parse().unwrap()).is_ok());
/// assert!(strict.check_uri(&"https://10.0.0.1:6443".parse().unwrap()).is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointPolicy {
    allowed: Vec<Cidr>,
    only_allowed: bool,
    plain_http: bool,
    insecure_tls: bool,
}

impl EndpointPolicy {
    /// Also accept addresses in `range`, whatever class they fall in.
    #[must_use]
    pub fn allow(mut self, range: Cidr) -> Self {
        self.allowed.push(range);
        self
    }

    /// Refuse every address outside the ranges given to [`allow`](Self::allow), not only the
    /// classes refused by default (the collector's `--endpoint-policy strict`). With no range
    /// allowed, every address is refused.
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        self.only_allowed = strict;
        self
    }

    /// Accept `http://` endpoints (the token then crosses the network in clear).
    #[must_use]
    pub fn allow_plain_http(mut self, allow: bool) -> Self {
        self.plain_http = allow;
        self
    }

    /// Accept members that skip verifying the apiserver's certificate.
    #[must_use]
    pub fn allow_insecure_tls(mut self, allow: bool) -> Self {
        self.insecure_tls = allow;
        self
    }

    /// What tests against loopback apiservers need: `127.0.0.1/32` and `::1/128`, and
    /// `http://`.
    pub fn loopback() -> Self {
        Self::default()
            .allow(Cidr::from_ip(IpAddr::from([127, 0, 0, 1])))
            .allow(Cidr::from_ip(IpAddr::from(Ipv6Addr::LOCALHOST)))
            .allow_plain_http(true)
    }

    /// Whether members that skip TLS verification are accepted.
    pub fn insecure_tls_allowed(&self) -> bool {
        self.insecure_tls
    }

    /// Checks the endpoint as written: its scheme, that it holds no user info, and its host
    /// (an address literal, `localhost`, or a metadata service name). A host name is checked
    /// again, on what it resolves to, by [`check_ip`](Self::check_ip).
    ///
    /// # Errors
    /// [`ValidationError::Forbidden`]; the message never quotes user info.
    pub fn check_uri(&self, uri: &http::Uri) -> Result<(), ValidationError> {
        if uri.scheme_str() == Some("http") && !self.plain_http {
            return Err(forbidden(
                "http:// sends the token in clear; use https:// (or --allow-plain-http)",
            ));
        }
        self.check_host(uri)
    }

    /// Checks a proxy URL: user info and host as [`check_uri`](Self::check_uri) does, but
    /// `http://` is fine (the member's TLS runs inside the tunnel).
    ///
    /// # Errors
    /// [`ValidationError::Forbidden`]; the message never quotes user info.
    pub fn check_proxy(&self, uri: &http::Uri) -> Result<(), ValidationError> {
        self.check_host(uri)
    }

    fn check_host(&self, uri: &http::Uri) -> Result<(), ValidationError> {
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(forbidden(
                "the URL holds user info (credentials); not shown",
            ));
        }
        let host = uri.host().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.check_ip(ip);
        }
        let name = host.trim_end_matches('.').to_ascii_lowercase();
        if METADATA_HOSTS.contains(&name.as_str()) {
            return Err(forbidden(&format!("{name} is a cloud metadata service")));
        }
        if name == "localhost" || name.ends_with(".localhost") {
            return self.check_ip(IpAddr::from([127, 0, 0, 1]));
        }
        // Resolvers read `2130706433` or `0x7f.1` as addresses; no real name ends in digits.
        let last = name.rsplit('.').next().unwrap_or_default();
        if last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
            return Err(forbidden(&format!(
                "{} is neither a host name nor a plain IP address",
                crate::Text::new(&name)
            )));
        }
        Ok(())
    }

    /// Checks one address the endpoint's host is (or resolves to).
    ///
    /// # Errors
    /// [`ValidationError::Forbidden`], naming the address and its class.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), ValidationError> {
        let ip = ip.to_canonical();
        if self.allowed.iter().any(|range| range.contains(ip)) {
            return Ok(());
        }
        if self.only_allowed {
            return Err(forbidden(&format!(
                "{ip} is outside every --allow-endpoint range (--endpoint-policy strict)"
            )));
        }
        match class(ip) {
            None => Ok(()),
            Some(class) => Err(forbidden(&format!(
                "{ip} is a {class} address (allow it with --allow-endpoint)"
            ))),
        }
    }

    /// Checks that a member skipping TLS verification is allowed.
    ///
    /// # Errors
    /// [`ValidationError::Forbidden`].
    pub fn check_insecure(&self, insecure_skip_tls_verify: bool) -> Result<(), ValidationError> {
        if insecure_skip_tls_verify && !self.insecure_tls {
            return Err(forbidden(
                "insecureSkipTLSVerification would send the token to anyone on the path \
                 (allow it with --allow-insecure-members)",
            ));
        }
        Ok(())
    }
}

/// Why `ip` is refused by default, if it is.
fn class(ip: IpAddr) -> Option<&'static str> {
    if METADATA_ADDRS.contains(&ip) || ip == IpAddr::from([169, 254, 169, 254]) {
        return Some("cloud metadata");
    }
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => Some("loopback"),
        IpAddr::V4(v4) if v4.is_link_local() => Some("link-local"),
        IpAddr::V4(v4) if v4.is_unspecified() => Some("unspecified"),
        IpAddr::V4(v4) if v4.is_broadcast() || v4.is_multicast() => Some("broadcast or multicast"),
        IpAddr::V4(v4) if v4.octets()[0] == 0 => Some("\"this network\" (0.0.0.0/8)"),
        IpAddr::V6(v6) if v6.is_loopback() => Some("loopback"),
        IpAddr::V6(v6) if v6.is_unicast_link_local() => Some("link-local"),
        IpAddr::V6(v6) if v6.is_unspecified() => Some("unspecified"),
        IpAddr::V6(v6) if v6.is_multicast() => Some("multicast"),
        _ => None,
    }
}

fn forbidden(why: &str) -> ValidationError {
    ValidationError::Forbidden(why.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn uri(s: &str) -> http::Uri {
        s.parse().unwrap()
    }

    // Parsed and judged only: nothing here is dialled.
    #[rstest]
    #[case::loopback("https://127.0.0.1:6443", "loopback")]
    #[case::loopback_range("https://127.1.2.3", "loopback")]
    #[case::loopback_v6("https://[::1]:6443", "loopback")]
    #[case::mapped_loopback("https://[::ffff:127.0.0.1]", "loopback")]
    #[case::localhost("https://localhost:6443", "loopback")]
    #[case::localhost_dot("https://LOCALHOST.:6443", "loopback")]
    #[case::sub_localhost("https://a.localhost", "loopback")]
    #[case::link_local("https://169.254.1.1", "link-local")]
    #[case::link_local_v6("https://[fe80::1]", "link-local")]
    #[case::metadata("https://169.254.169.254", "cloud metadata")]
    #[case::mapped_metadata("https://[::ffff:169.254.169.254]", "cloud metadata")]
    #[case::metadata_aws_v6("https://[fd00:ec2::254]", "cloud metadata")]
    #[case::metadata_gcp_v6("https://[fd20:ce::254]", "cloud metadata")]
    #[case::metadata_gcp_v6_port("https://[FD20:CE:0::254]:443", "cloud metadata")]
    #[case::metadata_alibaba("https://100.100.100.200", "cloud metadata")]
    #[case::metadata_azure_wireserver("https://168.63.129.16", "cloud metadata")]
    #[case::mapped_wireserver("https://[::ffff:168.63.129.16]:32526", "cloud metadata")]
    #[case::metadata_name("https://metadata.google.internal", "metadata service")]
    #[case::metadata_name_dot("https://Metadata.Google.Internal.", "metadata service")]
    #[case::unspecified("https://0.0.0.0:6443", "unspecified")]
    #[case::unspecified_v6("https://[::]:6443", "unspecified")]
    #[case::this_network("https://0.1.2.3", "0.0.0.0/8")]
    #[case::broadcast("https://255.255.255.255", "broadcast")]
    #[case::decimal("https://2130706433", "neither a host name")]
    #[case::hex("https://0x7f.1", "neither a host name")]
    #[case::userinfo("https://user:hunter2@10.0.0.1", "user info")]
    #[case::http("http://10.0.0.1", "http://")]
    fn the_default_policy_refuses(#[case] url: &str, #[case] want: &str) {
        let err = EndpointPolicy::default().check_uri(&uri(url)).unwrap_err();
        assert!(matches!(err, ValidationError::Forbidden(_)), "{err:?}");
        assert!(err.detail().contains(want), "{url}: {err}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[rstest]
    #[case::private("https://10.0.0.1:6443")]
    #[case::public_name("https://api.example.com")]
    #[case::digits_inside_a_name("https://k8s-1.example.com")]
    #[case::private_v6("https://[fd12::1]:6443")]
    fn the_default_policy_accepts(#[case] url: &str) {
        assert_eq!(EndpointPolicy::default().check_uri(&uri(url)), Ok(()));
    }

    #[test]
    fn an_allowed_range_opts_in_to_exactly_its_addresses() {
        let policy = EndpointPolicy::default().allow("127.0.0.1/32".parse().unwrap());
        assert_eq!(policy.check_uri(&uri("https://127.0.0.1:1")), Ok(()));
        assert_eq!(policy.check_uri(&uri("https://localhost:1")), Ok(()));
        assert!(policy.check_uri(&uri("https://127.0.0.2:1")).is_err());
        assert!(policy.check_uri(&uri("https://169.254.169.254")).is_err());
        assert!(policy.check_uri(&uri("http://127.0.0.1:1")).is_err());
    }

    #[test]
    fn the_new_metadata_addresses_are_refused_as_proxies_and_when_resolved() {
        let policy = EndpointPolicy::default();
        for ip in ["fd20:ce::254", "168.63.129.16"] {
            let err = policy.check_ip(ip.parse().unwrap()).unwrap_err();
            assert!(err.detail().contains("cloud metadata"), "{ip}: {err}");
        }
        for proxy in ["http://168.63.129.16:80", "http://[fd20:ce::254]:80"] {
            assert!(policy.check_proxy(&uri(proxy)).is_err(), "{proxy}");
        }
        // Their neighbours are ordinary addresses.
        assert_eq!(policy.check_ip("168.63.129.17".parse().unwrap()), Ok(()));
        assert_eq!(policy.check_ip("fd20:ce::253".parse().unwrap()), Ok(()));
    }

    // Judged only: 10.0.0.1 and the names are never dialled.
    #[test]
    fn strict_mode_admits_only_the_allowed_ranges() {
        let strict = EndpointPolicy::default()
            .allow("127.0.0.2/32".parse().unwrap())
            .allow("10.1.0.0/16".parse().unwrap())
            .strict(true);
        assert_eq!(strict.check_uri(&uri("https://127.0.0.2:6443")), Ok(()));
        assert_eq!(strict.check_uri(&uri("https://10.1.2.3:6443")), Ok(()));
        assert_eq!(strict.check_proxy(&uri("http://10.1.0.9:3128")), Ok(()));
        for url in [
            "https://10.0.0.1:6443",
            "https://[fd12::1]:6443",
            "https://127.0.0.3:6443",
            "https://localhost:6443",
        ] {
            let err = strict.check_uri(&uri(url)).unwrap_err();
            let says = "--endpoint-policy strict";
            assert!(err.detail().contains(says), "{url}: {err}");
        }
        assert!(strict.check_proxy(&uri("http://10.0.0.1:3128")).is_err());
        // A name passes as written; what it resolves to is judged before it is dialled.
        assert_eq!(strict.check_uri(&uri("https://api.example.com")), Ok(()));
        assert!(strict.check_ip("203.0.113.7".parse().unwrap()).is_err());
        assert_eq!(strict.check_ip("10.1.255.255".parse().unwrap()), Ok(()));
        // The default mode admits the same outside address.
        let default = EndpointPolicy::default().allow("127.0.0.2/32".parse().unwrap());
        assert_eq!(default.check_uri(&uri("https://10.0.0.1:6443")), Ok(()));
        // Strict with nothing allowed admits nothing.
        let nothing = EndpointPolicy::default().strict(true);
        assert!(nothing.check_ip("10.0.0.1".parse().unwrap()).is_err());
    }

    proptest::proptest! {
        // Judged only, never dialled.
        #[test]
        fn strict_mode_admits_exactly_the_allowed_range(
            net in proptest::prelude::any::<IpAddr>(),
            prefix in 0_u8..=128,
            ip in proptest::prelude::any::<IpAddr>(),
        ) {
            let range = format!("{net}/{}", if net.is_ipv4() { prefix % 33 } else { prefix })
                .parse::<Cidr>();
            proptest::prop_assume!(range.is_ok());
            let range = range.unwrap();
            let strict = EndpointPolicy::default().allow(range).strict(true);
            proptest::prop_assert_eq!(
                strict.check_ip(ip).is_ok(),
                range.contains(ip.to_canonical()),
                "{} in strict mode with {:?}", ip, range
            );
        }
    }

    #[test]
    fn plain_http_and_insecure_tls_need_their_opt_in() {
        let strict = EndpointPolicy::default();
        assert!(strict.check_insecure(true).is_err());
        assert_eq!(strict.check_insecure(false), Ok(()));
        let loose = strict.allow_plain_http(true).allow_insecure_tls(true);
        assert_eq!(loose.check_insecure(true), Ok(()));
        assert_eq!(loose.check_uri(&uri("http://10.0.0.1")), Ok(()));
    }
}
