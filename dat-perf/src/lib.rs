//! # datperf
//!
//! Measures any DAT IA (latency, bandwidth, connection rate) through the public `dat` API
//! only (`dat::Registry::from_env()`, `open_ia(name)`), and the baselines it should be judged
//! against (raw TCP over loopback, a two-process shared-memory spin ping-pong, memcpy,
//! libfabric's `fi_pingpong`).
//!
//! ```text
//! datperf                         short latency + bandwidth sweep on the default IA
//! datperf info                    IAs of the resolved configuration, providers, attributes
//! datperf lat|bw|conn [--ia NAME] [--sizes 1..4M] [--iters N] [--window N] [--wait]
//! datperf server [--bind ADDR] [--port 18515] [--once]
//! datperf client HOST [--port 18515] [--tests lat,bw,conn]
//! datperf compare [--short] [--rounds N] [--plot FILE.png]
//! ```
//! Every command takes `--json` (one [`Record`] object per line) and `--plot FILE.png`.
//!
//! How the figures are made:
//! * Latency is half a round trip. Send/recv ping-pong: the client sends and waits for the
//!   echo; the server echoes each message. As in perftest's `ib_send_lat`, which pre-posts
//!   its receives, no receive is posted between a message's arrival and the answering send:
//!   the server keeps two receives posted and replaces the one a message took after its
//!   echo; the client posts the receive for each reply right after the send before it (the
//!   first before the first send). RDMA-write ping-pong: the client writes the server's buffer,
//!   the server polls the last byte of its buffer (driving `Ia::progress`) and writes back
//!   into the client's receive half, which the client polls likewise.
//! * Bandwidth streams sends (into a window of receives), RDMA writes or RDMA reads with a
//!   window of outstanding operations, closed by a fence (a zero-length send the server
//!   answers), so the time covers delivery, not just posting.
//! * Connection rate: connect with private data (checked at both ends), ESTABLISHED,
//!   disconnect, on a fresh EP each time.
//! * Each figure runs a warm-up chunk, then chunks of growing size until its iterations or its
//!   time budget are used up; the server's part of every chunk is started and finished over
//!   the control socket ([`proto`], JSON lines over TCP, default port
//!   [`proto::DEFAULT_PORT`] = 18515), which is also how the server announces its IA address,
//!   connection qualifier and RMR triplet. A control receive polls the socket (yielding) for
//!   up to 2 ms before it sleeps: ends that slept between chunks were woken onto one core.
//! * Polling mode (default) dequeues in a loop; `--wait` uses `Evd::wait` (in 1 ms slices).
//!   Every wait is bounded by `--timeout-s`: a dead or stalled peer fails that session, never
//!   the process, and never hangs.
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
