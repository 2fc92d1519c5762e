//! # datperf
//!
//! Measures any DAT IA (latency, bandwidth, connection rate) through the public `dat` API,
//! and the baselines it should be judged against (raw TCP over loopback, a two-process
//! shared-memory spin ping-pong, memcpy, libfabric's `fi_pingpong`).
//!
//! * [`local`] runs server and client in one process; [`server`] / [`client`] are the two
//!   ends, joined by a JSON-lines control socket ([`proto`]).
//! * [`baseline`] holds the reference programs, [`compare`] interleaves everything,
//!   [`record`] and [`plot`] present the figures.

pub mod baseline;
pub mod client;
pub mod compare;
pub mod error;
pub mod info;
pub mod local;
pub mod plot;
pub mod proto;
pub mod record;
pub mod server;
pub mod side;
pub mod sizes;
pub mod suite;

pub use client::{Client, RunOpts};
pub use error::{PerfError, PerfResult};
pub use proto::Test;
pub use record::{Metric, Op, Record};
pub use side::Mode;

#[cfg(test)]
pub(crate) mod testutil {
    use dat::Registry;
    use dat_core::config::{Source, parse_toml};
    use dat_core::testing::{Fabric, MemProvider};

    const REGISTRY: &str = r#"
version = 1
default = "a"

[[ia]]
name = "a"
provider = "mem"
params = { address = "10.0.0.1" }

[[ia]]
name = "b"
provider = "mem"
params = { address = "10.0.0.2" }

[[ia]]
name = "tcp-lo"
provider = "tcp"
params = { address = "127.0.0.1" }
"#;

    /// A registry over a fresh in-memory fabric with IAs `a` and `b`, plus `tcp-lo` whose
    /// provider is not compiled in.
    pub fn registry() -> Registry {
        let cfg = parse_toml(REGISTRY, Source::Embedded, &["mem", "tcp"]).expect("parses");
        Registry::new(cfg, vec![MemProvider::new(Fabric::new())])
    }
}
