//! The passive side: listeners, sockets between accept(2) and the consumer's answer, and
//! handing an accepted socket to its endpoint.

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use dat_core::provider::{ConnRequest, SpUpcalls};
use dat_core::types::{CrId, SpId};
use mio::Interest;
use mio::net::TcpListener;

use super::{Entry, EpConn, Io, Listener, Pending, Shared, lock, write};
use crate::engine::parse_request;

/// Largest connection request (header, fixed fields, private data); more bytes before the
/// consumer's answer mean a broken requester.
const MAX_REQUEST: usize = crate::wire::HEADER_LEN + 16 + crate::wire::MAX_PRIVATE_DATA;

impl Shared {
    /// Moves a pending passive socket to the endpoint that accepted it.
    pub(crate) fn adopt_pending(&self, p: &Pending, ep: &EpConn, io: &mut Io) -> bool {
        write(&self.entries).remove(&p.token);
        let Some(mut sock) = lock(&p.sock).take() else {
            return false;
        };
        if self
            .registry
            .reregister(&mut sock, ep.token, Interest::READABLE | Interest::WRITABLE)
            .is_err()
        {
            return false;
        }
        let rx = std::mem::take(&mut *lock(&p.rx));
        io.attach(sock, false, &rx);
        true
    }

    /// Writes a reject on a pending socket and closes it.
    pub(crate) fn reject_pending(&self, p: &Pending, private_data: &[u8]) {
        write(&self.entries).remove(&p.token);
        if let Some(mut sock) = lock(&p.sock).take() {
            let mut out = Vec::new();
            crate::engine::encode_reject(private_data, &mut out);
            let _ = sock.write_all(&out);
            self.linger(sock);
        }
    }

    /// Starts listening on `port` of the IA's address for requests to qualifier `qual`
    /// (`None`: the qualifier of the port the kernel binds, `psp_create_any`).
    pub(crate) fn listen(
        &self,
        sp: SpId,
        port: u16,
        qual: Option<u64>,
        upcalls: Arc<dyn SpUpcalls>,
    ) -> std::io::Result<u16> {
        let addr = SocketAddr::new(self.params.address, port);
        let s = self.socket(&addr, true)?;
        s.bind(&addr.into())?;
        s.listen(1024)?;
        let bound = s.local_addr()?.as_socket().map_or(port, |a| a.port());
        let mut sock = TcpListener::from_std(s.into());
        let token = self.token();
        self.registry
            .register(&mut sock, token, Interest::READABLE)?;
        let qual = qual.unwrap_or_else(|| u64::from(bound.saturating_sub(self.params.port_base)));
        let l = Arc::new(Listener {
            sp,
            qual,
            sock: Mutex::new(sock),
            upcalls,
        });
        write(&self.entries).insert(token, Entry::Listener(l));
        lock(&self.listeners).insert(sp, token);
        Ok(bound)
    }

    /// Stops listening.
    pub(crate) fn unlisten(&self, sp: SpId) {
        let Some(token) = lock(&self.listeners).remove(&sp) else {
            return;
        };
        let removed = write(&self.entries).remove(&token);
        if let Some(Entry::Listener(l)) = removed {
            // The listener closes when its last reference drops; deregister it now.
            let _ = self.registry.deregister(&mut *lock(&l.sock));
        }
    }

    /// Accepts every waiting connection of a listener.
    pub(super) fn on_listener(&self, l: &Listener) {
        loop {
            let accepted = lock(&l.sock).accept();
            match accepted {
                Ok((mut sock, peer)) => {
                    let s = socket2::SockRef::from(&sock);
                    if let Err(e) = self.set_options(&s) {
                        tracing::debug!(error = %e, "socket options");
                    }
                    let token = self.token();
                    if self
                        .registry
                        .register(&mut sock, token, Interest::READABLE)
                        .is_err()
                    {
                        continue;
                    }
                    tracing::debug!(sp = l.sp.0, %peer, "incoming connection");
                    let p = Arc::new(Pending {
                        token,
                        sock: Mutex::new(Some(sock)),
                        rx: Mutex::new(Vec::new()),
                        upcalls: l.upcalls.clone(),
                        peer,
                        qual: l.qual,
                        request: Mutex::new(None),
                    });
                    write(&self.entries).insert(token, Entry::Pending(p.clone()));
                    self.on_pending(&p);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    return;
                }
            }
        }
    }

    /// Reads a pending socket: its connection request, or its end.
    pub(super) fn on_pending(&self, p: &Arc<Pending>) {
        let mut sock_g = lock(&p.sock);
        let Some(sock) = sock_g.as_mut() else {
            return;
        };
        let mut rx = lock(&p.rx);
        let mut buf = [0u8; 2048];
        let mut gone = false;
        loop {
            match sock.read(&mut buf) {
                Ok(0) => {
                    gone = true;
                    break;
                }
                Ok(n) => {
                    if rx.len() + n > MAX_REQUEST {
                        gone = true;
                        break;
                    }
                    rx.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    gone = true;
                    break;
                }
            }
        }
        let mut req = lock(&p.request);
        let mut offer = None;
        let mut other_qual = false;
        if req.is_none() && !gone {
            match parse_request(&rx) {
                Ok(Some((r, _))) if r.qual != p.qual => {
                    tracing::debug!(peer = %p.peer, want = r.qual, have = p.qual, "request for another qualifier on this port");
                    other_qual = true;
                }
                Ok(Some((r, used))) => {
                    rx.drain(..used);
                    *req = Some(r.clone());
                    offer = Some(r);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(peer = %p.peer, error = %e, "bad connection request");
                    gone = true;
                }
            }
        }
        drop((req, rx));
        if other_qual {
            // As if nobody listened: the requester retries, then reports NON_PEER_REJECTED.
            drop(sock_g);
            write(&self.entries).remove(&p.token);
            if let Some(mut sock) = lock(&p.sock).take() {
                let mut out = Vec::new();
                crate::engine::encode_no_listener(&mut out);
                let _ = sock.write_all(&out);
                self.linger(sock);
            }
            return;
        }
        if gone {
            if let Some(mut s) = sock_g.take() {
                let _ = self.registry.deregister(&mut s);
            }
            drop(sock_g);
            write(&self.entries).remove(&p.token);
            lock(&self.crs).retain(|_, q| !Arc::ptr_eq(q, p));
            return;
        }
        drop(sock_g);
        if let Some(r) = offer {
            let cr = CrId(u32::try_from(self.next_cr.fetch_add(1, Ordering::Relaxed)).unwrap_or(0));
            lock(&self.crs).insert(cr, p.clone());
            let remote = SocketAddr::new(p.peer.ip(), 0);
            p.upcalls.connection_request(ConnRequest {
                cr,
                remote,
                private_data: r.private_data,
            });
        }
    }
}
