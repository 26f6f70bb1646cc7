//! [`Cidr`]: an address range an operator opts in to with `--allow-endpoint`.

use std::{fmt, net::IpAddr, str::FromStr};

/// An IPv4 or IPv6 range, `addr/prefix`; a bare address is its own `/32` or `/128`.
///
/// ```
/// use member_client::validation::Cidr;
/// let loopback: Cidr = "127.0.0.1/32".parse().unwrap();
/// assert!(loopback.contains("127.0.0.1".parse().unwrap()));
/// assert!(!loopback.contains("127.0.0.2".parse().unwrap()));
/// assert!("10.0.0.0/33".parse::<Cidr>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// Why a string is not a [`Cidr`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a CIDR (expected ADDRESS[/PREFIX], e.g. 127.0.0.1/32): {0}")]
pub struct CidrError(String);

impl Cidr {
    /// The range holding `addr` alone.
    pub fn from_ip(addr: IpAddr) -> Self {
        let prefix = if addr.is_ipv4() { 32 } else { 128 };
        Self { addr, prefix }
    }

    /// Whether `ip` is in the range. An IPv4-mapped IPv6 address counts both as itself and
    /// as its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.matches(ip) || self.matches(ip.to_canonical())
    }

    fn matches(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                same_prefix(net.to_bits().into(), ip.to_bits().into(), 32 - self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                same_prefix(net.to_bits(), ip.to_bits(), 128 - self.prefix)
            }
            _ => false,
        }
    }
}

/// Whether `net` and `ip` agree but for their last `host_bits` bits (all of them at 128).
fn same_prefix(net: u128, ip: u128, host_bits: u8) -> bool {
    net.checked_shr(host_bits.into()) == ip.checked_shr(host_bits.into())
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || CidrError(crate::Text::new(s).to_string());
        let (addr, prefix) = match s.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| err())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(err)?,
        };
        Ok(Self { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("127.0.0.1/32", "127.0.0.1", true)]
    #[case("127.0.0.1", "127.0.0.1", true)]
    #[case("127.0.0.0/8", "127.255.0.1", true)]
    #[case("10.0.0.0/9", "10.128.0.1", false)]
    #[case("10.0.0.0/9", "10.127.0.1", true)]
    #[case("0.0.0.0/0", "8.8.8.8", true)]
    #[case("::1/128", "::1", true)]
    #[case("::/0", "fd00::1", true)]
    #[case("127.0.0.1/32", "::ffff:127.0.0.1", true)]
    #[case("::1/128", "127.0.0.1", false)]
    #[case("::ffff:0.0.0.0/96", "::ffff:10.0.0.1", true)]
    fn ranges_contain_their_addresses(#[case] cidr: &str, #[case] ip: &str, #[case] want: bool) {
        let cidr: Cidr = cidr.parse().unwrap();
        assert_eq!(cidr.contains(ip.parse().unwrap()), want, "{cidr} {ip}");
    }

    #[rstest]
    #[case("")]
    #[case("127.0.0.1/33")]
    #[case("::1/129")]
    #[case("localhost")]
    #[case("10.0.0.0/")]
    #[case("10.0.0.0/-1")]
    fn bad_ranges_are_refused(#[case] s: &str) {
        assert!(s.parse::<Cidr>().is_err(), "{s}");
    }
}
