//! [`TcpIa`]: one open IA of the TCP provider, the [`Transport`] the facade calls.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use dat_core::defaults::{software_ia_attr, software_provider_attr};
use dat_core::error::{DatError, DatResult, ErrorType, Subtype};
use dat_core::provider::{
    EpConfig, EpUpcalls, IaUpcalls, PostOp, SpUpcalls, SrqConfig, Transport, WorkRequest,
};
use dat_core::srq::CountTakes;
use dat_core::types::{
    CloseFlags, ConnQual, CrId, EpId, EvdId, IaAttr, ProviderAttr, SpId, SrqId, Timeout,
};

use crate::driver::{Clock, Pump, Shared, lock, read, write};
use crate::engine::{Engine, EngineConfig, SharedSrq};
use crate::params::TcpParams;
use crate::wire::MAX_PRIVATE_DATA;

/// One open IA: the shared state and its driver thread.
pub(crate) struct TcpIa {
    pub(crate) name: String,
    pub(crate) shared: Arc<Shared>,
    pub(crate) thread: Mutex<Option<JoinHandle<()>>>,
    pub(crate) closed: AtomicBool,
    /// Where buffers taken from an SRQ are reported (its low watermark).
    pub(crate) ia_upcalls: Arc<dyn IaUpcalls>,
}

fn no_ep() -> DatError {
    DatError::invalid_state(Subtype::NoSubtype)
}

fn qual_unavailable() -> DatError {
    DatError::new(ErrorType::ConnQualUnavailable, Subtype::NoSubtype)
}

impl TcpIa {
    fn params(&self) -> &TcpParams {
        &self.shared.params
    }

    fn srq(&self, srq: Option<SrqId>) -> Option<SharedSrq> {
        srq.and_then(|s| read(&self.shared.srqs).get(&s).cloned())
    }

    fn listen_port(
        &self,
        sp: SpId,
        port: u16,
        qual: Option<u64>,
        upcalls: &Arc<dyn SpUpcalls>,
    ) -> DatResult<u16> {
        self.shared
            .listen(sp, port, qual, upcalls.clone())
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EADDRINUSE) => {
                    DatError::new(ErrorType::ConnQualInUse, Subtype::NoSubtype)
                }
                _ => {
                    tracing::debug!(port, error = %e, "listen failed");
                    qual_unavailable()
                }
            })
    }
}

impl Transport for TcpIa {
    fn ia_attr(&self) -> IaAttr {
        let p = self.params();
        let mut a = software_ia_attr(
            &self.name,
            "datrs-tcp",
            SocketAddr::new(p.address, p.port_base),
        );
        a.max_eps = p.max_eps;
        a
    }

    fn provider_attr(&self) -> ProviderAttr {
        software_provider_attr("tcp", MAX_PRIVATE_DATA as u32)
    }

    fn create_ep(&self, ep: EpId, cfg: &EpConfig, upcalls: Arc<dyn EpUpcalls>) -> DatResult<()> {
        if read(&self.shared.eps).len() >= self.params().max_eps as usize {
            return Err(DatError::resources(Subtype::ResourceTep));
        }
        let mut engine = Engine::new(EngineConfig {
            mem: self.shared.mem.clone(),
            pz: cfg.pz,
            srq: self.srq(cfg.srq),
            rnr_timeout: self.params().rnr_timeout,
            connect_retry: self.params().connect_retry,
        });
        engine.set_zero_copy(true);
        let upcalls = CountTakes::wrap(upcalls, cfg.srq, &self.ia_upcalls);
        self.shared.add_ep(ep, engine, upcalls, cfg.srq);
        Ok(())
    }

    fn modify_ep(&self, ep: EpId, cfg: &EpConfig) -> DatResult<()> {
        let conn = self.shared.ep(ep).ok_or_else(no_ep)?;
        let srq = self.srq(cfg.srq);
        *lock(&conn.srq) = cfg.srq;
        self.shared
            .with_io(&conn, |_, io| io.engine.set_binding(cfg.pz, srq));
        Ok(())
    }

    fn reset_ep(&self, ep: EpId) -> DatResult<()> {
        let conn = self.shared.ep(ep).ok_or_else(no_ep)?;
        self.shared.with_io(&conn, |sh, io| {
            if io.engine.is_active() {
                io.engine.disconnect();
                sh.pump(io, Instant::now(), Pump::Post);
            }
            io.engine.reset();
            if let Some(s) = io.sock.take() {
                drop(s);
            }
            io.connecting = false;
        });
        Ok(())
    }

    fn free_ep(&self, ep: EpId) {
        if let Some(conn) = self.shared.ep(ep) {
            self.shared.with_io(&conn, |sh, io| {
                if io.engine.is_active() {
                    io.engine.disconnect();
                    sh.pump(io, Instant::now(), Pump::Post);
                }
            });
        }
        self.shared.remove_ep(ep);
    }

    fn connect(
        &self,
        ep: EpId,
        remote: SocketAddr,
        qual: ConnQual,
        private_data: &[u8],
        timeout: Timeout,
    ) -> DatResult<()> {
        if private_data.len() > MAX_PRIVATE_DATA {
            return Err(DatError::invalid_arg(5));
        }
        let local = self.params().address;
        if remote.is_ipv4() != local.is_ipv4() {
            return Err(DatError::new(
                ErrorType::InvalidAddress,
                Subtype::InvalidAddressUnsupported,
            ));
        }
        let conn = self.shared.ep(ep).ok_or_else(no_ep)?;
        let now = Instant::now();
        let limit = match (timeout.duration(), self.params().connect_timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let deadline = limit.map(|d| now + d);
        let base = if remote.port() != 0 {
            remote.port()
        } else {
            self.params().port_base
        };
        let port = TcpParams::port_of(base, qual.0);
        self.shared.with_io(&conn, |sh, io| {
            io.engine.connect(now, qual.0, private_data, deadline);
            io.peer = Some(SocketAddr::new(remote.ip(), port));
            sh.open_active(&conn, io, now).map_err(|e| {
                io.engine.reset();
                tracing::warn!(error = %e, "socket");
                DatError::resources(Subtype::NoSubtype)
            })
        })
    }

    fn listen(
        &self,
        sp: SpId,
        qual: Option<ConnQual>,
        upcalls: Arc<dyn SpUpcalls>,
    ) -> DatResult<ConnQual> {
        let base = self.params().port_base;
        match qual {
            Some(q) => {
                let port = TcpParams::port_of(base, q.0);
                self.listen_port(sp, port, Some(q.0), &upcalls)?;
                Ok(q)
            }
            None => {
                for _ in 0..64 {
                    let port = self.listen_port(sp, 0, None, &upcalls)?;
                    if port > base {
                        return Ok(ConnQual(u64::from(port - base)));
                    }
                    self.shared.unlisten(sp);
                }
                Err(qual_unavailable())
            }
        }
    }

    fn unlisten(&self, sp: SpId) {
        self.shared.unlisten(sp);
    }

    fn accept(&self, cr: CrId, ep: EpId, private_data: &[u8]) -> DatResult<()> {
        if private_data.len() > MAX_PRIVATE_DATA {
            return Err(DatError::invalid_arg(4));
        }
        let gone = || {
            DatError::new(
                ErrorType::InvalidAddress,
                Subtype::InvalidAddressUnreachable,
            )
        };
        let pending = lock(&self.shared.crs).remove(&cr).ok_or_else(gone)?;
        let req = lock(&pending.request).clone().ok_or_else(gone)?;
        let conn = self.shared.ep(ep).ok_or_else(no_ep)?;
        self.shared.with_io(&conn, |sh, io| {
            if !sh.adopt_pending(&pending, &conn, io) {
                return Err(gone());
            }
            io.engine.accept(req.rnr_timeout, private_data);
            sh.pump(io, Instant::now(), Pump::Serve);
            Ok(())
        })
    }

    fn reject(&self, cr: CrId, private_data: &[u8]) -> DatResult<()> {
        if private_data.len() > MAX_PRIVATE_DATA {
            return Err(DatError::invalid_arg(3));
        }
        if let Some(p) = lock(&self.shared.crs).remove(&cr) {
            self.shared.reject_pending(&p, private_data);
        }
        Ok(())
    }

    fn disconnect(&self, ep: EpId, flags: CloseFlags) -> DatResult<()> {
        let Some(conn) = self.shared.ep(ep) else {
            return Ok(());
        };
        // A graceful disconnect waits for the requests already posted: each may wait at the
        // peer for a receive up to our receiver-not-ready timeout (then it is refused), and
        // its bytes may take up to the TCP user timeout to be acknowledged (then the socket
        // fails). Past both, the peer is not answering: disconnect abruptly.
        let p = self.params();
        let limit = p.rnr_timeout + p.user_timeout.unwrap_or(p.rnr_timeout);
        let now = Instant::now();
        self.shared.with_io(&conn, |sh, io| {
            match flags {
                CloseFlags::Graceful => io.engine.disconnect_graceful(now, limit),
                CloseFlags::Abrupt => io.engine.disconnect(),
            }
            sh.pump(io, now, Pump::Post);
        });
        Ok(())
    }

    fn post(&self, ep: EpId, wr: WorkRequest) -> DatResult<()> {
        // The endpoint table stays read-locked for the post instead of cloning the
        // endpoint's `Arc` (two atomic operations less per post): only `create_ep`,
        // `free_ep` and `close` write it, and no upcall of a post calls them (the upcall
        // rules of `dat_core::provider`).
        let eps = read(&self.shared.eps);
        let conn = eps.get(&ep).ok_or_else(no_ep)?;
        let recv = wr.op == PostOp::Recv;
        self.shared.with_io_post(conn, |sh, io| {
            io.engine.post(wr);
            let pump = !recv || io.engine.is_parked();
            if pump {
                // Frames go out from this thread; a parked send may now proceed.
                let mode = if recv { Pump::Serve } else { Pump::Post };
                sh.pump_with(io, &mut Clock::lazy(), mode);
            }
            pump
        });
        Ok(())
    }

    fn create_srq(&self, srq: SrqId, _cfg: &SrqConfig) -> DatResult<()> {
        write(&self.shared.srqs).insert(srq, Arc::new(Mutex::new(VecDeque::new())));
        Ok(())
    }

    fn srq_post_recv(&self, srq: SrqId, wr: WorkRequest) -> DatResult<()> {
        let q = read(&self.shared.srqs)
            .get(&srq)
            .cloned()
            .ok_or_else(no_ep)?;
        lock(&q).push_back(wr);
        self.shared.unpark_srq(srq);
        Ok(())
    }

    fn free_srq(&self, srq: SrqId) {
        write(&self.shared.srqs).remove(&srq);
    }

    fn progress(&self) -> bool {
        self.shared.progress()
    }

    /// The engine holds the count of suppressed successes back until a later request's
    /// completion or the end of the connection (see [`Engine::poll_event`]).
    fn retired_unreported(&self, ep: EpId) -> u64 {
        self.shared
            .ep(ep)
            .map_or(0, |conn| lock(&conn.io).engine.retired_unreported())
    }

    /// No sleep of its own: hands the sockets back to the driver thread (a waiter about to
    /// sleep no longer polls them) and lets the facade sleep.
    fn block(&self, _evd: EvdId, _timeout: std::time::Duration) -> bool {
        self.shared.app_sleeps();
        false
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.shared.stop();
        let thread = lock(&self.thread).take();
        // Never join from the driver thread itself (a close from inside an upcall).
        if let Some(t) = thread.filter(|t| t.thread().id() != std::thread::current().id())
            && t.join().is_err()
        {
            tracing::error!(ia = %self.name, "driver thread panicked");
        }
        self.shared.close_all();
    }
}

impl Drop for TcpIa {
    fn drop(&mut self) {
        self.close();
    }
}
