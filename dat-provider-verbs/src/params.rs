//! The `params` of a `provider = "verbs"` registry entry.
//!
//! | key | type | default | meaning |
//! | --- | --- | --- | --- |
//! | `device` | string | the first device | verbs device name (`mlx5_0`, `rxe0`); see `ibv_devices` |
//! | `port` | integer 1..=255 | `1` | port of `device` |
//! | `address` | string | none | IPv4 or IPv6 address of an RDMA netdev; resolved through rdma_cm to its device and port (excludes `device`, `port`, `netdev`) |
//! | `netdev` | string | none | network interface of an RDMA device (`eth0`, `ib0`): its first IPv4 address, else its first IPv6 one, resolved as `address` |
//! | `gid_index` | integer 0..=65535 | `0` | GID index of the port used as the source GID (RoCE: pick the RoCE v2 IPv4-mapped entry, `show_gids`) |
//! | `max_eps` | integer | device `max_qp` | endpoints per IA (capped by the device) |
//! | `max_dto_per_ep` | integer | device `max_qp_wr` | outstanding DTOs per EP queue (capped by the device) |
//! | `max_evd_qlen` | integer | device `max_cqe` | events per EVD (capped by the device) |
//! | `max_inline_data` | integer 0..=4096 | `64` | sends up to this size are posted inline |
//! | `retry_count` | integer 0..=7 | `7` | transport retries of a request (`rdma_conn_param.retry_count`) |
//! | `rnr_retry_count` | integer 0..=7 | `7` | receiver-not-ready retries; 7 retries forever, so a send waits for the peer's receive as DAT requires |
//!
//! `address` and `netdev` name the IA by its IP address, as OFA dapl's `ofa-v2-*` entries do
//! (`"eth0 0"`); `device` and `port` name it by the verbs device, as `ofa-v2-scm-*` do
//! (`"rxe0 1"`). With neither, the IA opens port 1 of the first device.

use std::net::IpAddr;

use dat_core::error::{DatError, ErrorType, Subtype};
use dat_core::provider::OpenError;

/// How the IA names its device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Locator {
    /// A verbs device and port; `None` is the first device.
    Device {
        /// Device name, `None` for the first one.
        name: Option<String>,
        /// Port number (1-based).
        port: u8,
    },
    /// An IP address resolved through rdma_cm (from `address` or `netdev`).
    Address {
        /// The address.
        ip: IpAddr,
        /// The interface it came from, if given as `netdev`.
        netdev: Option<String>,
    },
}

/// Validated parameters of one verbs IA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerbsParams {
    /// Which device and port.
    pub locator: Locator,
    /// Source GID index.
    pub gid_index: u16,
    /// Endpoint limit (None: the device's).
    pub max_eps: Option<u32>,
    /// DTO queue depth limit (None: the device's).
    pub max_dto_per_ep: Option<u32>,
    /// EVD length limit (None: the device's).
    pub max_evd_qlen: Option<u32>,
    /// Inline send threshold in bytes.
    pub max_inline_data: u32,
    /// Transport retry count of a connection.
    pub retry_count: u8,
    /// RNR retry count of a connection (7: forever).
    pub rnr_retry_count: u8,
}

impl Default for VerbsParams {
    fn default() -> VerbsParams {
        VerbsParams {
            locator: Locator::Device {
                name: None,
                port: 1,
            },
            gid_index: 0,
            max_eps: None,
            max_dto_per_ep: None,
            max_evd_qlen: None,
            max_inline_data: 64,
            retry_count: 7,
            rnr_retry_count: 7,
        }
    }
}

/// The keys [`VerbsParams::parse`] knows.
pub const KEYS: &[&str] = &[
    "device",
    "port",
    "address",
    "netdev",
    "gid_index",
    "max_eps",
    "max_dto_per_ep",
    "max_evd_qlen",
    "max_inline_data",
    "retry_count",
    "rnr_retry_count",
];

impl VerbsParams {
    /// Parses and validates `params` without touching any device; `origin` (`file:line`) and
    /// `ia` name the entry in messages.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` for an unknown key, a value of the wrong type or out of range,
    /// or conflicting keys (the message names the key and the origin);
    /// `DAT_PROVIDER_NOT_FOUND` for a `netdev` with no IP address.
    pub fn parse(params: &toml::Table, origin: &str, ia: &str) -> Result<VerbsParams, OpenError> {
        let bad = |key: &str, why: String| {
            OpenError::new(
                DatError::new(ErrorType::InvalidParameter, Subtype::NoSubtype),
                format!("{origin}: IA `{ia}`: `params.{key}`: {why}"),
            )
        };
        let mut p = VerbsParams::default();
        let mut device: Option<String> = None;
        let mut port: Option<u8> = None;
        let mut address: Option<IpAddr> = None;
        let mut netdev: Option<String> = None;
        for (key, value) in params {
            let int = |min: i64, max: i64| -> Result<u64, OpenError> {
                match value.as_integer() {
                    Some(v) if (min..=max).contains(&v) => Ok(v.unsigned_abs()),
                    Some(v) => Err(bad(key, format!("{v} is outside {min}..={max}"))),
                    None => Err(bad(key, format!("expected an integer, found {value}"))),
                }
            };
            let string = || -> Result<String, OpenError> {
                match value.as_str() {
                    Some(s) if !s.is_empty() => Ok(s.to_owned()),
                    Some(_) => Err(bad(key, "must not be empty".to_owned())),
                    None => Err(bad(key, format!("expected a string, found {value}"))),
                }
            };
            let limit = || int(1, i64::from(u32::MAX)).map(|v| Some(v as u32));
            match key.as_str() {
                "device" => device = Some(string()?),
                "port" => port = Some(int(1, 255)? as u8),
                "address" => {
                    let s = string()?;
                    address =
                        Some(s.parse().map_err(|_| {
                            bad(key, format!("`{s}` is not an IPv4 or IPv6 address"))
                        })?);
                }
                "netdev" => netdev = Some(string()?),
                "gid_index" => p.gid_index = int(0, 65_535)? as u16,
                "max_eps" => p.max_eps = limit()?,
                "max_dto_per_ep" => p.max_dto_per_ep = limit()?,
                "max_evd_qlen" => p.max_evd_qlen = limit()?,
                "max_inline_data" => p.max_inline_data = int(0, 4096)? as u32,
                "retry_count" => p.retry_count = int(0, 7)? as u8,
                "rnr_retry_count" => p.rnr_retry_count = int(0, 7)? as u8,
                other => {
                    return Err(bad(
                        other,
                        format!("unknown key (known: {})", KEYS.join(", ")),
                    ));
                }
            }
        }
        let by_device = device.is_some() || port.is_some();
        p.locator = match (address, netdev) {
            (Some(_), Some(_)) => {
                return Err(bad("netdev", "give `address` or `netdev`, not both".into()));
            }
            (Some(_), None) | (None, Some(_)) if by_device => {
                let k = if address.is_some() {
                    "address"
                } else {
                    "netdev"
                };
                return Err(bad(
                    k,
                    "names the IA by IP address; it excludes `device` and `port`".into(),
                ));
            }
            (Some(ip), None) => Locator::Address { ip, netdev: None },
            (None, Some(ifname)) => {
                let ip = dat_sys::ifaddr::interface_address(&ifname).ok_or_else(|| {
                    OpenError::new(
                        DatError::new(ErrorType::ProviderNotFound, Subtype::NoSubtype),
                        format!(
                            "{origin}: IA `{ia}`: `params.netdev`: interface `{ifname}` does not \
                             exist or has no IP address"
                        ),
                    )
                })?;
                Locator::Address {
                    ip,
                    netdev: Some(ifname),
                }
            }
            (None, None) => Locator::Device {
                name: device,
                port: port.unwrap_or(1),
            },
        };
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<VerbsParams, OpenError> {
        let t: toml::Table = toml::from_str(s).unwrap();
        VerbsParams::parse(&t, "dat.toml:3", "v0")
    }

    #[test]
    fn defaults_open_port_one_of_the_first_device() {
        let p = parse("").unwrap();
        assert_eq!(p, VerbsParams::default());
        assert_eq!(
            p.locator,
            Locator::Device {
                name: None,
                port: 1
            }
        );
    }

    #[test]
    fn device_port_and_limits() {
        let p = parse(
            "device = \"rxe0\"\nport = 2\ngid_index = 1\nmax_eps = 8\nmax_dto_per_ep = 100\n\
             max_evd_qlen = 50\nmax_inline_data = 0",
        )
        .unwrap();
        assert_eq!(
            p.locator,
            Locator::Device {
                name: Some("rxe0".into()),
                port: 2
            }
        );
        assert_eq!(p.gid_index, 1);
        assert_eq!(p.max_eps, Some(8));
        assert_eq!(p.max_dto_per_ep, Some(100));
        assert_eq!(p.max_evd_qlen, Some(50));
        assert_eq!(p.max_inline_data, 0);
    }

    #[test]
    fn address_is_parsed() {
        let p = parse("address = \"192.0.2.1\"").unwrap();
        assert_eq!(
            p.locator,
            Locator::Address {
                ip: "192.0.2.1".parse().unwrap(),
                netdev: None
            }
        );
    }

    #[test]
    fn netdev_resolves_to_its_address() {
        let p = parse("netdev = \"lo\"").unwrap();
        assert_eq!(
            p.locator,
            Locator::Address {
                ip: "127.0.0.1".parse().unwrap(),
                netdev: Some("lo".into())
            }
        );
        let e = parse("netdev = \"datrs-no-such-if\"").unwrap_err();
        assert_eq!(e.code.kind(), ErrorType::ProviderNotFound);
        assert!(e.message.contains("datrs-no-such-if"), "{}", e.message);
    }

    #[test]
    fn unknown_key_is_named() {
        let e = parse("devcie = \"rxe0\"").unwrap_err();
        assert_eq!(e.code.kind(), ErrorType::InvalidParameter);
        assert!(e.message.contains("params.devcie"), "{}", e.message);
        assert!(e.message.contains("dat.toml:3"), "{}", e.message);
        assert!(e.message.contains("IA `v0`"), "{}", e.message);
    }

    #[test]
    fn bad_values_are_named() {
        for (src, key) in [
            ("port = 0", "params.port"),
            ("port = 256", "params.port"),
            ("port = \"1\"", "params.port"),
            ("device = \"\"", "params.device"),
            ("device = 3", "params.device"),
            ("address = \"rxe0\"", "params.address"),
            ("gid_index = -1", "params.gid_index"),
            ("max_eps = 0", "params.max_eps"),
            ("max_inline_data = 5000", "params.max_inline_data"),
            ("address = \"192.0.2.1\"\nnetdev = \"lo\"", "params.netdev"),
            (
                "address = \"192.0.2.1\"\ndevice = \"rxe0\"",
                "params.address",
            ),
            ("netdev = \"lo\"\nport = 1", "params.netdev"),
        ] {
            let e = parse(src).unwrap_err();
            assert_eq!(e.code.kind(), ErrorType::InvalidParameter, "{src}");
            assert!(e.message.contains(key), "{src}: {}", e.message);
        }
    }
}
