//! # dat-provider-tcp
//!
//! The TCP provider of datrs (`provider = "tcp"`, the default transport): DAT 2.0 semantics
//! (connection management with private data, two-sided send/receive with gather/scatter,
//! one-sided RDMA read and write, InfiniBand-like error reporting) emulated over TCP, across
//! processes and hosts, IPv4 and IPv6.
//!
//! * [`wire`]: the frame format; the parser validates lengths first and never panics.
//! * [`engine`]: the sans-IO protocol engine of one connection, tested with a virtual clock.
//! * `driver`: the only code doing I/O (mio + socket2) and the per-IA driver thread.
//! * [`params`]: the registry `params` and how connection qualifiers map to TCP ports
//!   (qualifier `q` is TCP port `port_base + q`; `port_base` defaults to 0; qualifiers
//!   beyond the port space fold onto ports from 1024 up, and the connection request carries
//!   the whole qualifier, so a listener refuses requests meant for another qualifier).
//!
//! # Connecting
//! A connect that finds nobody listening (the TCP connect refused, or a listener serving
//! another qualifier on that port) is retried for `connect_retry_ms` (default 500 ms; backoff
//! 10 ms doubling to 100 ms), as InfiniBand's CM retries a request: a client may connect a
//! moment before its server creates the PSP (`dtest` does). Then `NON_PEER_REJECTED`; a
//! shorter consumer timeout still ends it with `TIMED_OUT`. The retry timer is an engine
//! deadline like the others; the driver opens the new socket.
//!
//! # Threads and progress
//! Each IA has one driver thread. It sleeps in `epoll_wait` until a socket, a deadline (a
//! connect timeout, a receiver-not-ready timeout) or a new socket needs it, and serves the
//! target side of one-sided operations, connection requests and dead peers while the
//! application sleeps. Application threads do the rest themselves: a post writes its frames
//! to the socket from the caller's thread, and a thread spinning in `dat_evd_wait` or
//! `dat_evd_dequeue` reads and executes incoming frames through
//! `Transport::progress`. While an application
//! thread polls, the driver takes the sockets out of `epoll` so that it is not woken for every
//! message, and takes them back when the polling stops.
//!
//! # Semantics
//! As InfiniBand RC: completions in posting order; a send waits at the target for a receive
//! (back-pressure) up to the requester's `rnr_timeout_ms`, then
//! `DAT_DTO_ERR_RECEIVER_NOT_READY`; a receive too small is `DAT_DTO_ERR_LOCAL_LENGTH` (the
//! requester gets `DAT_DTO_ERR_REMOTE_RESPONDER`); an incoming RDMA is checked against the
//! memory table (rkey, protection zone, bounds, privileges) before any byte moves, else
//! `DAT_DTO_ERR_REMOTE_ACCESS` at the requester; each of these breaks both sides. The last
//! byte of an RDMA write (at the target) and of an RDMA read (at the requester) is stored
//! last, after a `Release` fence, as InfiniBand places it: consumers poll that byte and then
//! read the rest (`dtest -D -a`). A lost peer
//! or a malformed frame breaks that connection only. After the terminal fact everything
//! outstanding is flushed, requests first, then receives, each in posting order.
//!
//! ```no_run
//! use std::sync::Arc;
//! use dat_core::config::{Source, parse_toml};
//! let cfg = parse_toml(
//!     "version = 1\n[[ia]]\nname = \"tcp-lo\"\nprovider = \"tcp\"\nparams = { address = \"127.0.0.1\" }\n",
//!     Source::Embedded,
//!     &["tcp"],
//! )?;
//! let registry = dat::Registry::new(cfg, vec![Arc::new(dat_provider_tcp::TcpProvider::new())]);
//! let ia = registry.open_ia(Some("tcp-lo"), 8)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use dat_core::error::{DatError, ErrorType, Subtype};
use dat_core::provider::{OpenError, OpenRequest, Provider, Transport};

mod driver;
pub mod engine;
pub mod params;
mod transport;
pub mod wire;

pub use params::TcpParams;

/// The TCP provider: `provider = "tcp"` in the registry. See [`params`] for its `params`.
#[derive(Debug, Default)]
pub struct TcpProvider {
    _private: (),
}

impl TcpProvider {
    /// The provider, ready to register.
    pub fn new() -> TcpProvider {
        TcpProvider { _private: () }
    }
}

impl Provider for TcpProvider {
    fn name(&self) -> &'static str {
        "tcp"
    }

    /// Opens an IA: parses `params`, creates the poller and starts the driver thread.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` for an unknown key or a bad value (the message names the key
    /// and the origin), `DAT_PROVIDER_NOT_FOUND` for an interface without an address,
    /// `DAT_INSUFFICIENT_RESOURCES` if the poller or the thread cannot be created.
    fn open(&self, req: OpenRequest<'_>) -> Result<Arc<dyn Transport>, OpenError> {
        let params = TcpParams::parse(req.params, req.origin, req.ia_name)?;
        let resources = |what: &str, e: std::io::Error| {
            OpenError::new(
                DatError::new(ErrorType::InsufficientResources, Subtype::NoSubtype),
                format!("IA `{}`: {what}: {e}", req.ia_name),
            )
        };
        let (shared, poll) =
            driver::Shared::new(params, req.mem.clone()).map_err(|e| resources("poller", e))?;
        let runner = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("dat-tcp-{}", req.ia_name))
            .spawn(move || runner.run(poll))
            .map_err(|e| resources("driver thread", e))?;
        tracing::debug!(ia = req.ia_name, address = %shared.params.address, "tcp IA open");
        Ok(Arc::new(transport::TcpIa {
            name: req.ia_name.to_owned(),
            shared,
            thread: Mutex::new(Some(thread)),
            closed: AtomicBool::new(false),
            ia_upcalls: req.upcalls.clone(),
        }))
    }
}
