//! Which webhook targets may be called (server-side request forgery).
//!
//! A workload's spec names a URL, so the URL is hostile input: without a
//! check, anyone who may submit could make the server call its own
//! loopback services or a cloud's metadata service (which hands out the
//! host's credentials). A target is refused when its URL is not `https`
//! (`http` only where the admin allows it), carries credentials (they
//! would reach logs and events), or names a known metadata host; and when
//! *any* address its host resolves to is loopback, link-local, a cloud
//! metadata address, unspecified or not unicast — unless the admin allows
//! that network by CIDR (`127.0.0.1/32` for a relay on the host). Every
//! resolved address is checked, and a delivery connects only to a checked
//! one, so a name that resolves differently on the second lookup (DNS
//! rebinding) gains nothing. Private networks (10/8, 172.16/12,
//! 192.168/16, fc00::/7) are allowed: receivers inside a company's
//! network are the common case.

use reqwest::Url;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The longest URL accepted.
pub const MAX_URL: usize = 2048;

/// What an admin allows beyond the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Plain `http://` targets (a receiver on a trusted network).
    pub allow_http: bool,
    /// Networks allowed although the default refuses them.
    pub allow: Vec<Cidr>,
}

/// An IP network, `addr/len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub len: u8,
}

impl std::str::FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a network; write ADDRESS/LENGTH, e.g. 127.0.0.1/32 or fd00::/8");
        let (a, l) = s.trim().split_once('/').ok_or_else(bad)?;
        let addr: IpAddr = a.parse().map_err(|_| bad())?;
        let len: u8 = l.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return Err(bad());
        }
        Ok(Cidr { addr, len })
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let prefix = |a: u128, b: u128, bits: u32, len: u8| {
            let shift = bits - u32::from(len);
            len == 0 || (a >> shift) == (b >> shift)
        };
        match (self.addr, unmapped(ip)) {
            (IpAddr::V4(n), IpAddr::V4(i)) => {
                prefix(u128::from(u32::from(n)), u128::from(u32::from(i)), 32, self.len)
            }
            (IpAddr::V6(n), IpAddr::V6(i)) => prefix(u128::from(n), u128::from(i), 128, self.len),
            _ => false,
        }
    }
}

/// Why a target is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("webhook {0:?} is not a URL; write https://host/path")]
    NotUrl(String),
    #[error("webhook URL is longer than {MAX_URL} bytes")]
    TooLong,
    #[error("webhook {url} is {scheme}; use https (http only where the admin allows it)")]
    Scheme { url: String, scheme: String },
    #[error("webhook URL carries a user name or password; give the receiver's secret by signature instead")]
    Credentials,
    #[error("webhook host {host} is a cloud metadata service; it is never called")]
    MetadataHost { host: String },
    #[error(
        "webhook host {host} resolves to {addr}, a {why} address; refused unless the admin allows its network"
    )]
    Address { host: String, addr: IpAddr, why: &'static str },
    #[error("webhook host {host} resolves to no address")]
    NoAddress { host: String },
}

/// Host names of metadata services (they resolve to refused addresses
/// anyway; named, they are refused before any lookup).
const METADATA_HOSTS: &[&str] =
    &["metadata.google.internal", "metadata", "instance-data", "metadata.azure.internal"];

/// Checks the URL itself: scheme, credentials, host. The addresses its
/// host resolves to are checked by [`check_addresses`] before each
/// delivery.
pub fn check_url(url: &str, policy: &Policy) -> Result<Url, TargetError> {
    if url.len() > MAX_URL {
        return Err(TargetError::TooLong);
    }
    let u = Url::parse(url).map_err(|_| TargetError::NotUrl(crate::text::sanitize(url).into_owned()))?;
    match u.scheme() {
        "https" => {}
        "http" if policy.allow_http => {}
        s => return Err(TargetError::Scheme { url: u.as_str().into(), scheme: s.into() }),
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(TargetError::Credentials);
    }
    let host = u.host_str().ok_or_else(|| TargetError::NotUrl(u.as_str().into()))?;
    let bare = host.trim_end_matches('.').to_ascii_lowercase();
    if METADATA_HOSTS.contains(&bare.as_str()) {
        return Err(TargetError::MetadataHost { host: bare });
    }
    // A literal address is checked now.
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = literal.parse::<IpAddr>() {
        check_addresses(&bare, &[ip], policy)?;
    }
    Ok(u)
}

/// Checks every address `host` resolved to; all must pass.
pub fn check_addresses(host: &str, addrs: &[IpAddr], policy: &Policy) -> Result<(), TargetError> {
    if addrs.is_empty() {
        return Err(TargetError::NoAddress { host: host.into() });
    }
    for &addr in addrs {
        if let Some(why) = refused(addr)
            && !policy.allow.iter().any(|c| c.contains(addr))
        {
            return Err(TargetError::Address { host: host.into(), addr, why });
        }
    }
    Ok(())
}

/// An IPv4 address carried in IPv6 (mapped `::ffff:a.b.c.d`, or NAT64's
/// `64:ff9b::/96`) as the IPv4 address it reaches.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let s = v6.segments();
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                let o = v6.octets();
                return IpAddr::V4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
            }
            ip
        }
        v4 => v4,
    }
}

/// Why the default refuses `ip`, if it does.
fn refused(ip: IpAddr) -> Option<&'static str> {
    match unmapped(ip) {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => refused_v6(v6),
    }
}

fn refused_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) {
        // AWS, GCP, Azure, OCI, OpenStack; Alibaba Cloud.
        Some("cloud metadata")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if o[0] == 0 {
        Some("unspecified")
    } else if ip.is_multicast() || ip.is_broadcast() || o[0] >= 240 {
        Some("non-unicast")
    } else {
        None
    }
}

fn refused_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    // AWS's instance metadata over IPv6.
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        Some("cloud metadata")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if s[0] & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("non-unicast")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn metadata_loopback_and_link_local_are_refused_private_networks_are_not() {
        let p = Policy::default();
        for (addr, why) in [
            ("169.254.169.254", "cloud metadata"),
            ("100.100.100.200", "cloud metadata"),
            ("fd00:ec2::254", "cloud metadata"),
            ("::ffff:169.254.169.254", "cloud metadata"),
            ("64:ff9b::a9fe:a9fe", "cloud metadata"),
            ("127.0.0.1", "loopback"),
            ("127.8.9.10", "loopback"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("169.254.1.1", "link-local"),
            ("fe80::1", "link-local"),
            ("0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("224.0.0.1", "non-unicast"),
            ("255.255.255.255", "non-unicast"),
            ("ff02::1", "non-unicast"),
        ] {
            let got = check_addresses("h", &[ip(addr)], &p);
            assert!(matches!(&got, Err(TargetError::Address { why: w, .. }) if *w == why), "{addr}: {got:?}");
        }
        for addr in ["10.1.2.3", "172.16.0.9", "192.168.1.1", "fd12::1", "93.184.216.34", "2606:4700::1"] {
            assert_eq!(check_addresses("h", &[ip(addr)], &p), Ok(()), "{addr}");
        }
        // Every address counts: one refused among good ones refuses.
        assert!(check_addresses("h", &[ip("93.184.216.34"), ip("127.0.0.1")], &p).is_err());
        assert!(matches!(check_addresses("h", &[], &p), Err(TargetError::NoAddress { .. })));
    }

    #[test]
    fn an_admin_allows_a_network_by_cidr_and_only_that_one() {
        let p = Policy { allow_http: true, allow: vec!["127.0.0.1/32".parse().unwrap()] };
        assert_eq!(check_addresses("h", &[ip("127.0.0.1")], &p), Ok(()));
        assert_eq!(check_addresses("h", &[ip("::ffff:127.0.0.1")], &p), Ok(()));
        assert!(check_addresses("h", &[ip("127.0.0.2")], &p).is_err());
        assert!(check_addresses("h", &[ip("169.254.169.254")], &p).is_err());
        let all_link_local = Policy { allow: vec!["169.254.0.0/16".parse().unwrap()], ..Policy::default() };
        assert_eq!(check_addresses("h", &[ip("169.254.169.254")], &all_link_local), Ok(()));
        for bad in ["127.0.0.1", "127.0.0.1/33", "::/129", "x/8"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
        assert!("::/0".parse::<Cidr>().unwrap().contains(ip("::1")));
    }

    #[test]
    fn urls_are_https_without_credentials_and_not_metadata_hosts() {
        let p = Policy::default();
        assert!(check_url("https://hooks.example.com/canopy?x=1", &p).is_ok());
        assert!(matches!(check_url("http://hooks.example.com/", &p), Err(TargetError::Scheme { .. })));
        assert!(check_url("http://hooks.example.com/", &Policy { allow_http: true, ..p.clone() }).is_ok());
        assert!(matches!(check_url("file:///etc/passwd", &p), Err(TargetError::Scheme { .. })));
        assert!(matches!(check_url("https://u:pw@hooks.example.com/", &p), Err(TargetError::Credentials)));
        assert!(matches!(
            check_url("https://metadata.google.internal./x", &p),
            Err(TargetError::MetadataHost { .. })
        ));
        assert!(matches!(check_url("https://169.254.169.254/latest", &p), Err(TargetError::Address { .. })));
        assert!(matches!(check_url("https://[::1]:8443/", &p), Err(TargetError::Address { .. })));
        assert!(
            matches!(check_url("not a url\u{1b}[2J", &p), Err(TargetError::NotUrl(s)) if !s.contains('\u{1b}'))
        );
        assert_eq!(check_url(&format!("https://h/{}", "a".repeat(MAX_URL)), &p), Err(TargetError::TooLong));
    }
}
