//! The pump: moves bytes between one endpoint's socket and its engine, for whichever thread
//! holds the endpoint (a post, a polling application thread, the driver).

use std::io::ErrorKind;
use std::time::Instant;

use super::{Io, PUMP_BUDGET, Shared, vectored};
use crate::engine::TransportError;

/// Who pumps, and so how: see [`Shared::pump`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pump {
    /// A post on the application's thread: write only; acknowledgements ride on the frames.
    Post,
    /// An application thread polling: read and write; bare acks delayed (its reply usually
    /// carries them).
    Poll,
    /// The driver thread, or an application call that must finish the job (accept, a
    /// receive that releases a waiting send): read and write, bare acks at once.
    Serve,
}

/// The time, read from the system clock on first use only.
pub(crate) struct Clock(Option<Instant>);

impl Clock {
    /// A clock that has been read already.
    pub(crate) fn at(now: Instant) -> Clock {
        Clock(Some(now))
    }

    /// A clock not read yet.
    pub(crate) fn lazy() -> Clock {
        Clock(None)
    }

    /// The time: the first call reads the system clock, later ones repeat it.
    pub(crate) fn now(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }
}

/// Maps an I/O error of a connection to what the engine should hear.
pub(super) fn transport_error(e: &std::io::Error) -> TransportError {
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => TransportError::Refused,
        Some(libc::ENETUNREACH | libc::EHOSTUNREACH | libc::EADDRNOTAVAIL) => {
            TransportError::Unreachable
        }
        _ => TransportError::Lost,
    }
}

impl Shared {
    /// Moves bytes between the endpoint's socket and engine until neither can go further.
    /// Returns true if anything moved.
    pub(crate) fn pump(&self, io: &mut Io, now: Instant, mode: Pump) -> bool {
        self.pump_with(io, &mut Clock::at(now), mode)
    }

    /// [`Shared::pump`] reading the clock only if it needs the time: to execute input, or
    /// to decide on an acknowledgement already waiting (a busy-polling thread's empty look,
    /// and a post, read none).
    pub(crate) fn pump_with(&self, io: &mut Io, clock: &mut Clock, mode: Pump) -> bool {
        let read = mode != Pump::Post;
        // An acknowledgement that becomes due in this pump was set from the clock of this
        // pump: it cannot be late yet, so without one waiting any time before now will do.
        // A request of ours waiting to be framed carries the acknowledgement (a reply, the
        // usual case): no bare ack to decide on either.
        let ack_clock = match mode {
            Pump::Serve => None,
            _ if io.engine.ack_pending() && !io.engine.request_waiting() => Some(clock.now()),
            _ => Some(self.epoch),
        };
        io.engine.set_ack_clock(ack_clock);
        if !read && io.rx_len == 0 && !io.connecting {
            // A post with no input waiting (the usual case): only writing to do.
            let wrote = self.transmit(io);
            return self.release_closed(io) || wrote;
        }
        let mut any = false;
        // A read that returned less than it asked for emptied the socket: another read in
        // this pump would only cost a system call to hear `EAGAIN` (bytes that arrive later
        // raise a new edge-triggered readiness, and the next poll reads them).
        let mut drained = false;
        for _ in 0..PUMP_BUDGET {
            let mut moved = false;
            if io.connecting {
                match self.check_connected(io, clock.now()) {
                    Some(true) => io.connecting = false,
                    Some(false) => return any,
                    None => moved = true,
                }
            }
            // Read first, so that what arrives is executed (and answered) in the same round.
            let room = io.rx_len < io.rx.len();
            if read
                && room
                && !drained
                && !io.engine.is_parked()
                && !io.connecting
                && let Some(sock) = io.sock.as_mut()
            {
                // A large payload arriving with nothing buffered goes straight to memory.
                let direct = if io.rx_len == 0 {
                    io.engine
                        .rx_direct()
                        .and_then(|(seg, off, len)| vectored::direct_target(seg, off, len))
                } else {
                    None
                };
                let asked = direct.map_or(io.rx.len() - io.rx_len, |(_, len)| len);
                let got = match direct {
                    Some((ptr, len)) => {
                        vectored::read_direct(sock, ptr, len).map(|r| r.map(|n| (n, true)))
                    }
                    None => vectored::read_buf(sock, &mut io.rx[io.rx_len..])
                        .map(|r| r.map(|n| (n, false))),
                };
                drained = matches!(got, Ok(Some((n, _))) if n > 0 && n < asked);
                match got {
                    // Nothing there (`EAGAIN`).
                    Ok(None) => {}
                    Ok(Some((n, true))) if n > 0 => {
                        io.engine.rx_direct_done(clock.now(), n);
                        moved = true;
                    }
                    Ok(Some((0, _))) => {
                        io.engine.handle_transport_error(TransportError::Lost);
                        io.rx_len = 0;
                        if let Some(s) = io.sock.take() {
                            let _ = self.registry.deregister(&mut { s });
                        }
                        moved = true;
                    }
                    Ok(Some((n, _))) => {
                        if io.engine.is_closed() {
                            // Nothing more to execute: discard.
                        } else {
                            io.rx_len += n;
                        }
                        moved = true;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => moved = true,
                    Err(e) => {
                        tracing::debug!(error = %e, "read failed");
                        io.engine.handle_transport_error(transport_error(&e));
                        io.rx_len = 0;
                        if let Some(s) = io.sock.take() {
                            let _ = self.registry.deregister(&mut { s });
                        }
                        moved = true;
                    }
                }
            }
            // Execute what was read.
            if io.rx_len > 0 && !io.engine.is_closed() {
                let used = io.engine.handle_input(clock.now(), &io.rx[..io.rx_len]);
                if used > 0 {
                    if used < io.rx_len {
                        io.rx.copy_within(used..io.rx_len, 0);
                    }
                    io.rx_len -= used;
                    moved = true;
                }
            }
            // Write what the engine has; a finished connection then gives its socket up.
            moved |= self.transmit(io);
            moved |= self.release_closed(io);
            if !moved {
                return any;
            }
            any = true;
            if !read && io.rx_len == 0 && !io.engine.wants_transmit() {
                // A post wrote its frames and has no input to execute: another round would
                // find nothing to do.
                return true;
            }
        }
        io.backlog = true;
        any
    }

    /// Writes what the engine has until it has nothing more or the socket is full. Returns
    /// true if anything moved (bytes, or a write error the engine was told of).
    fn transmit(&self, io: &mut Io) -> bool {
        let mut moved = false;
        let Some(sock) = io
            .sock
            .as_mut()
            .filter(|_| !io.connecting && io.engine.wants_transmit())
        else {
            return false;
        };
        loop {
            match vectored::write_queued(sock, &mut io.engine) {
                Ok(0) => break,
                Ok(n) => {
                    io.engine.advance_transmit(n);
                    moved = true;
                    if !io.engine.wants_transmit() {
                        // All written (a small message's only frame): asking again would only
                        // build an empty `iovec` list.
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!(error = %e, "write failed");
                    io.engine.handle_transport_error(transport_error(&e));
                    moved = true;
                    break;
                }
            }
        }
        moved
    }

    /// A finished connection gives its socket up once everything is written. Returns true if
    /// it did.
    fn release_closed(&self, io: &mut Io) -> bool {
        if io.engine.is_closed() && !io.engine.wants_transmit() {
            io.rx_len = 0;
            if let Some(s) = io.sock.take() {
                self.linger(s);
                return true;
            }
        }
        false
    }

    /// An active connect: `Some(true)` when connected, `Some(false)` still in progress,
    /// `None` when it failed (the engine was told).
    fn check_connected(&self, io: &mut Io, now: Instant) -> Option<bool> {
        let Some(sock) = io.sock.as_ref() else {
            io.connecting = false;
            return Some(false);
        };
        let failed = match sock.take_error() {
            Ok(Some(e)) | Err(e) => Some(e),
            Ok(None) => None,
        };
        let err = match failed {
            Some(e) => e,
            None => match sock.peer_addr() {
                Ok(_) => return Some(true),
                Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => return Some(false),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Some(false),
                Err(e) => e,
            },
        };
        tracing::debug!(error = %err, "connect failed");
        io.engine.handle_connect_error(now, transport_error(&err));
        io.connecting = false;
        if let Some(mut s) = io.sock.take() {
            let _ = self.registry.deregister(&mut s);
        }
        None
    }
}
