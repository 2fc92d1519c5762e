//! The active side: opening the socket of a connect, and again for each retry of a connect
//! that found nobody listening (the engine decides when, see `Engine::take_reconnect`).

use std::net::SocketAddr;
use std::time::Instant;

use mio::net::TcpStream;

use super::{EpConn, Io, Pump, Shared};
use crate::engine::TransportError;

/// What the engine hears of a connect that failed at once.
fn immediate_error(e: &std::io::Error) -> TransportError {
    match e.raw_os_error() {
        // Binding to an address we do not have, or a destination the kernel refuses.
        Some(libc::EACCES | libc::EPERM | libc::EINVAL) => TransportError::Unreachable,
        _ => super::transport_error(e),
    }
}

impl Shared {
    /// Starts a non-blocking TCP connect from the IA's address to `io.peer` for the
    /// endpoint, whose engine has the connection request queued. A failure the kernel
    /// reports at once goes to the engine (a refusal is retried there); a socket that
    /// cannot be created at all is `Err` (the caller decides what the consumer sees).
    pub(crate) fn open_active(
        &self,
        ep: &EpConn,
        io: &mut Io,
        now: Instant,
    ) -> std::io::Result<()> {
        let Some(addr) = io.peer else {
            io.engine.handle_transport_error(TransportError::Lost);
            return Ok(());
        };
        if let Some(old) = io.sock.take() {
            self.linger(old);
        }
        io.rx_len = 0;
        let fail = |io: &mut Io, e: &std::io::Error| {
            tracing::debug!(%addr, error = %e, "connect failed at once");
            io.engine.handle_connect_error(now, immediate_error(e));
        };
        let sock = self.socket(&addr, false)?;
        if let Err(e) = sock.bind(&SocketAddr::new(self.params.address, 0).into()) {
            fail(io, &e);
            return Ok(());
        }
        match sock.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => {
                fail(io, &e);
                return Ok(());
            }
        }
        let mut stream = TcpStream::from_std(sock.into());
        if let Err(e) = self.register_ep_socket(ep, &mut stream) {
            fail(io, &e);
            return Ok(());
        }
        io.attach(stream, true, &[]);
        self.pump(io, now, Pump::Post);
        Ok(())
    }
}
