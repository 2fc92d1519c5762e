//! Interface name to address (`getifaddrs`): the tcp provider's `params.address = "eth0"` and
//! the verbs provider's `params.netdev`.

use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The first IPv4 address of interface `name`, else its first IPv6 address; `None` if no
/// interface has exactly that name, it has no IP address, or the list cannot be read.
pub fn interface_address(name: &str) -> Option<IpAddr> {
    let mut v4 = None;
    let mut v6 = None;
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into `head` and returns 0 on success; the list is
    // freed with freeifaddrs below and not used afterwards.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a non-null node of the list getifaddrs returned, alive until
        // freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_name.is_null() || ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let ifname = unsafe { CStr::from_ptr(ifa.ifa_name) };
        if ifname.to_bytes() != name.as_bytes() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points to a sockaddr whose family says its type.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if family == libc::AF_INET && v4.is_none() {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            v4 = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                sin.sin_addr.s_addr,
            ))));
        } else if family == libc::AF_INET6 && v6.is_none() {
            // SAFETY: an AF_INET6 address is a sockaddr_in6.
            let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
            v6 = Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
        }
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    v4.or(v6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_its_ipv4_address() {
        assert_eq!(
            interface_address("lo"),
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
    }

    #[test]
    fn only_an_exact_existing_name_has_an_address() {
        for name in ["no-such-if0", "", "l", "lo0", "LO"] {
            assert_eq!(interface_address(name), None, "{name:?}");
        }
    }
}
