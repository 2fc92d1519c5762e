//! The `params` of a `provider = "tcp"` registry entry.
//!
//! | key | type | default | meaning |
//! | --- | --- | --- | --- |
//! | `address` | string | `"127.0.0.1"` | IPv4 or IPv6 address, or interface name (its first IPv4 address, else its first IPv6 one). The IA listens and connects from this address only. |
//! | `port_base` | integer 0..=65535 | `0` | TCP port of connection qualifier 0 (see below) |
//! | `rnr_timeout_ms` | integer | `5000` | how long a send of ours may wait at the peer for a receive before `DAT_DTO_ERR_RECEIVER_NOT_READY` |
//! | `connect_timeout_ms` | integer | `0` | upper bound on connection establishment when the consumer's timeout is infinite (0: none) |
//! | `connect_retry_ms` | integer | `500` | how long a connect that finds nobody listening is retried (backoff 10 ms doubling to 100 ms) before `NON_PEER_REJECTED`, as InfiniBand's CM retries a request; a shorter consumer timeout still ends it with `TIMED_OUT` (0: no retry) |
//! | `nodelay` | bool | `true` | `TCP_NODELAY` |
//! | `send_buffer` / `recv_buffer` | integer bytes | `0` | `SO_SNDBUF` / `SO_RCVBUF` (0: kernel autotuning) |
//! | `keepalive_idle_s` / `keepalive_interval_s` / `keepalive_count` | integers | `10` / `2` / `3` | TCP keepalive: a silent dead peer breaks the connection in about idle + interval × count seconds (0 idle: off) |
//! | `user_timeout_ms` | integer | `10000` | `TCP_USER_TIMEOUT`: data unacknowledged this long breaks the connection (0: kernel default) |
//! | `max_eps` | integer | `65536` | endpoints per IA (advertised in `max_eps`) |
//!
//! # Connection qualifiers and TCP ports
//! A qualifier `q` maps to TCP port `port_base + q` on the IA's address when that is a port
//! (1..=65535): with the default `port_base = 0` the qualifier *is* the port (the stock test
//! programs' qualifiers 45248.. and 62000..62999 are ports 45248.. and 62000..62999; keep
//! `port_base` so that no qualifier in use lands on port 15828, which those programs use
//! for their own socket).
//!
//! Any other qualifier (`port_base + q` of 0 or above 65535, such as dapltest's
//! `0xaffab1e + n`) is folded into the ports from `lo = max(port_base, 1024)` up:
//! port `lo + q mod (65536 - lo)` ([`TcpParams::port_of`]). Both sides compute the same
//! port. Folding can put two qualifiers on one port, so the connection request carries the
//! full 64-bit qualifier and the listener answers a request for a qualifier it does not
//! serve as if nobody listened (`NON_PEER_REJECTED` after the retry window); two service
//! points of one address whose qualifiers share a port cannot both exist (the second gets
//! `DAT_CONN_QUAL_IN_USE`).
//!
//! The IA address (`ia_address`) is `address:port_base`; a connect to a remote IA address
//! with a non-zero port uses that port as the remote's `port_base`, with port 0 our own.
//! `dat_psp_create_any` takes a port the kernel picks and reports `port - port_base`.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use dat_core::error::{DatError, ErrorType, Subtype};
use dat_core::provider::OpenError;

/// Validated parameters of one TCP IA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpParams {
    /// The address the IA listens on and connects from.
    pub address: IpAddr,
    /// TCP port of qualifier 0.
    pub port_base: u16,
    /// Receiver-not-ready timeout of our sends.
    pub rnr_timeout: Duration,
    /// Cap on establishment when the consumer waits forever.
    pub connect_timeout: Option<Duration>,
    /// How long a connect that finds nobody listening is retried.
    pub connect_retry: Duration,
    /// `TCP_NODELAY`.
    pub nodelay: bool,
    /// `SO_SNDBUF` (None: kernel default).
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` (None: kernel default).
    pub recv_buffer: Option<usize>,
    /// Keepalive idle time (None: keepalive off).
    pub keepalive_idle: Option<Duration>,
    /// Keepalive probe interval.
    pub keepalive_interval: Duration,
    /// Keepalive probes.
    pub keepalive_count: u32,
    /// `TCP_USER_TIMEOUT` (None: kernel default).
    pub user_timeout: Option<Duration>,
    /// Endpoints per IA.
    pub max_eps: u32,
}

impl Default for TcpParams {
    fn default() -> TcpParams {
        TcpParams {
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port_base: 0,
            rnr_timeout: Duration::from_millis(5000),
            connect_timeout: None,
            connect_retry: Duration::from_millis(500),
            nodelay: true,
            send_buffer: None,
            recv_buffer: None,
            keepalive_idle: Some(Duration::from_secs(10)),
            keepalive_interval: Duration::from_secs(2),
            keepalive_count: 3,
            user_timeout: Some(Duration::from_millis(10_000)),
            max_eps: 65_536,
        }
    }
}

/// The keys [`TcpParams::parse`] knows.
pub const KEYS: &[&str] = &[
    "address",
    "port_base",
    "rnr_timeout_ms",
    "connect_timeout_ms",
    "connect_retry_ms",
    "nodelay",
    "send_buffer",
    "recv_buffer",
    "keepalive_idle_s",
    "keepalive_interval_s",
    "keepalive_count",
    "user_timeout_ms",
    "max_eps",
];

impl TcpParams {
    /// Parses and validates `params`; `origin` (`file:line`) and `ia` name the entry in
    /// messages.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` for an unknown key, a value of the wrong type or out of
    /// range (the message names the key and the origin); `DAT_PROVIDER_NOT_FOUND` for an
    /// interface name with no address.
    pub fn parse(params: &toml::Table, origin: &str, ia: &str) -> Result<TcpParams, OpenError> {
        let mut p = TcpParams::default();
        let bad = |key: &str, why: String| {
            OpenError::new(
                DatError::new(ErrorType::InvalidParameter, Subtype::NoSubtype),
                format!("{origin}: IA `{ia}`: `params.{key}`: {why}"),
            )
        };
        for (key, value) in params {
            let int = |max: i64| -> Result<u64, OpenError> {
                match value.as_integer() {
                    Some(v) if (0..=max).contains(&v) => Ok(v.unsigned_abs()),
                    Some(v) => Err(bad(key, format!("{v} is outside 0..={max}"))),
                    None => Err(bad(key, format!("expected an integer, found {value}"))),
                }
            };
            match key.as_str() {
                "address" => {
                    let s = value
                        .as_str()
                        .ok_or_else(|| bad(key, format!("expected a string, found {value}")))?;
                    p.address = match s.parse::<IpAddr>() {
                        Ok(ip) => ip,
                        Err(_) => dat_sys::ifaddr::interface_address(s).ok_or_else(|| {
                            OpenError::new(
                                DatError::new(ErrorType::ProviderNotFound, Subtype::NoSubtype),
                                format!(
                                    "{origin}: IA `{ia}`: `params.address` `{s}` is neither an IP address nor an interface with one"
                                ),
                            )
                        })?,
                    };
                }
                "port_base" => p.port_base = u16::try_from(int(65_535)?).unwrap_or(0),
                "rnr_timeout_ms" => p.rnr_timeout = Duration::from_millis(int(3_600_000)?),
                "connect_timeout_ms" => {
                    let ms = int(3_600_000)?;
                    p.connect_timeout = (ms > 0).then(|| Duration::from_millis(ms));
                }
                "connect_retry_ms" => p.connect_retry = Duration::from_millis(int(600_000)?),
                "nodelay" => {
                    p.nodelay = value.as_bool().ok_or_else(|| {
                        bad(key, format!("expected true or false, found {value}"))
                    })?;
                }
                "send_buffer" => p.send_buffer = nonzero(int(1 << 30)?),
                "recv_buffer" => p.recv_buffer = nonzero(int(1 << 30)?),
                "keepalive_idle_s" => {
                    let s = int(86_400)?;
                    p.keepalive_idle = (s > 0).then(|| Duration::from_secs(s));
                }
                "keepalive_interval_s" => {
                    p.keepalive_interval = Duration::from_secs(int(3600)?.max(1));
                }
                "keepalive_count" => {
                    p.keepalive_count = u32::try_from(int(127)?.max(1)).unwrap_or(1);
                }
                "user_timeout_ms" => {
                    let ms = int(3_600_000)?;
                    p.user_timeout = (ms > 0).then(|| Duration::from_millis(ms));
                }
                "max_eps" => p.max_eps = u32::try_from(int(1 << 20)?.max(1)).unwrap_or(1),
                _ => {
                    return Err(bad(
                        key,
                        format!("unknown key (the tcp provider takes {})", KEYS.join(", ")),
                    ));
                }
            }
        }
        Ok(p)
    }

    /// The TCP port of qualifier `qual` with port base `base`: `base + qual` if that is a
    /// port (1..=65535), else `qual` folded into the ports from `lo = max(base, 1024)` up,
    /// `lo + qual mod (65536 - lo)` (see the module documentation).
    pub fn port_of(base: u16, qual: u64) -> u16 {
        let direct = u64::from(base)
            .checked_add(qual)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|&p| p != 0);
        direct.unwrap_or_else(|| {
            let lo = u64::from(base.max(1024));
            u16::try_from(lo + qual % (65_536 - lo)).unwrap_or(u16::MAX)
        })
    }
}

fn nonzero(v: u64) -> Option<usize> {
    usize::try_from(v).ok().filter(|&v| v > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<TcpParams, OpenError> {
        let t: toml::Table = text.parse().unwrap();
        TcpParams::parse(&t, "dat.toml:7", "tcp-x")
    }

    #[test]
    fn defaults_and_every_key() {
        assert_eq!(parse("").unwrap(), TcpParams::default());
        let p = parse(
            r#"address = "::1"
port_base = 20000
rnr_timeout_ms = 100
connect_timeout_ms = 2500
connect_retry_ms = 0
nodelay = false
send_buffer = 1048576
recv_buffer = 65536
keepalive_idle_s = 0
keepalive_interval_s = 5
keepalive_count = 4
user_timeout_ms = 0
max_eps = 10"#,
        )
        .unwrap();
        assert_eq!(p.address, "::1".parse::<IpAddr>().unwrap());
        assert_eq!(p.port_base, 20000);
        assert_eq!(p.rnr_timeout, Duration::from_millis(100));
        assert_eq!(p.connect_timeout, Some(Duration::from_millis(2500)));
        assert_eq!(p.connect_retry, Duration::ZERO);
        assert!(!p.nodelay);
        assert_eq!((p.send_buffer, p.recv_buffer), (Some(1 << 20), Some(65536)));
        assert_eq!(p.keepalive_idle, None);
        assert_eq!(p.keepalive_interval, Duration::from_secs(5));
        assert_eq!(p.keepalive_count, 4);
        assert_eq!(p.user_timeout, None);
        assert_eq!(p.max_eps, 10);
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key_and_origin() {
        let e = parse("adress = \"127.0.0.1\"").unwrap_err();
        assert_eq!(e.code.kind(), ErrorType::InvalidParameter);
        assert!(e.message.contains("dat.toml:7"), "{}", e.message);
        assert!(e.message.contains("params.adress"), "{}", e.message);
        assert!(e.message.contains("tcp-x"), "{}", e.message);
        let e = parse("port_base = 70000").unwrap_err();
        assert!(e.message.contains("params.port_base"), "{}", e.message);
        let e = parse("nodelay = 1").unwrap_err();
        assert!(e.message.contains("params.nodelay"), "{}", e.message);
        let e = parse("address = 5").unwrap_err();
        assert_eq!(e.code.kind(), ErrorType::InvalidParameter);
        let e = parse("address = \"no-such-interface-xyz\"").unwrap_err();
        assert_eq!(e.code.kind(), ErrorType::ProviderNotFound);
        assert!(e.message.contains("no-such-interface-xyz"));
    }

    #[test]
    fn interface_names_resolve() {
        let p = parse("address = \"lo\"").unwrap();
        assert!(p.address.is_loopback(), "{:?}", p.address);
    }

    #[test]
    fn qualifiers_map_to_ports() {
        assert_eq!(TcpParams::port_of(0, 45248), 45248);
        assert_eq!(TcpParams::port_of(0, 62999), 62999);
        assert_eq!(TcpParams::port_of(0, 5), 5);
        assert_eq!(TcpParams::port_of(20000, 5), 20005);
        assert_eq!(TcpParams::port_of(0, 65535), 65535);
    }

    #[test]
    fn qualifiers_beyond_the_port_space_fold_from_1024_or_port_base_up() {
        // Base 0: ports 1024..=65535, 64512 of them.
        assert_eq!(TcpParams::port_of(0, 65536), 1024 + 1024);
        assert_eq!(TcpParams::port_of(0, 0), 1024);
        // dapltest limit_psp: 0xaffab1e = 184527646 = 2860 * 64512 + 23326.
        assert_eq!(TcpParams::port_of(0, 0xaffab1e), 1024 + 23326);
        assert_eq!(TcpParams::port_of(0, 0xaffab1e + 1), 1024 + 23327);
        assert_eq!(TcpParams::port_of(0, u64::MAX), 1024 + 1023);
        // Qualifiers one span apart share a port.
        assert_eq!(
            TcpParams::port_of(0, 0xaffab1e),
            TcpParams::port_of(0, 0xaffab1e + 64512)
        );
        // Base 20000: ports 20000..=65535.
        assert_eq!(TcpParams::port_of(20000, 45536), 20000);
        assert_eq!(TcpParams::port_of(20000, 45537), 20001);
        assert_eq!(TcpParams::port_of(1, 65535), 1024 + 65535 % 64512);
        assert_eq!(TcpParams::port_of(65535, 1), 65535);
        for q in [0, 1, 65_535, 65_536, 1 << 40, u64::MAX] {
            for base in [0, 1, 1023, 1024, 30_000, 65_535] {
                assert_ne!(TcpParams::port_of(base, q), 0);
            }
        }
    }
}
