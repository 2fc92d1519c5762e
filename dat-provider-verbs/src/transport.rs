//! The open IA (`Transport`): opening the device, and every consumer call mapped onto the
//! shared state of [`crate::ia`] (connection management on rdma_cm, the verbs data path).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use dat_core::error::{DatError, DatResult, ErrorType, Subtype};
use dat_core::flag_lock::FlagGuard;
use dat_core::mem::Buffer;
use dat_core::provider::{
    CmFact, EpConfig, EpPost, EpUpcalls, IaUpcalls, MemKeys, OpenError, PostOp, RmrBind, SpUpcalls,
    SrqConfig, Transport, WorkRequest,
};
use dat_core::types::{
    CloseFlags, ConnQual, CrId, EpId, EvdFlags, EvdId, IaAddress, IaAttr, LmrId, MemPriv,
    ProviderAttr, PzId, SpId, SrqId, Timeout, VaType,
};

use crate::attr::{self, DeviceFacts, MAX_PRIVATE_DATA};
use crate::cm::{CmId, MAX_REQ_DATA_WITH_QUAL, frame, frame_req};
use crate::device::{self, Context, FindError, Pd};
use crate::ep::{
    Ep, EpSt, Pending, Phase, WR_BIND, WR_RECV, WR_SRQ, post_bind, post_marker, post_recv,
    post_send,
};
use crate::ia::{
    GRACEFUL_LIMIT, Limits, RESOLVE_LIMIT, RESOLVE_MS, Shared, SrqSlot, lock, read, write,
};
use crate::not_found;
use crate::params::{Locator, VerbsParams};
use crate::queue::SrqSlab;
use crate::req::{OneSeg, Req};
use crate::verbs::{
    ACCESS_MW_BIND, Mr, Mw, Srq, access_flags, may_skip_signal, page_size, window_access,
};

mod open;
mod rmr;

/// One open verbs IA: its attributes, the shared state and the event thread.
pub struct VerbsIa {
    name: String,
    ia_attr: IaAttr,
    provider_attr: ProviderAttr,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    closed: AtomicBool,
}

impl VerbsIa {
    fn ep(&self, ep: EpId) -> DatResult<Arc<Ep>> {
        read(&self.shared.eps)
            .get(&ep)
            .cloned()
            .ok_or_else(|| DatError::invalid_state(Subtype::NoSubtype))
    }
}

fn qual_unavailable() -> DatError {
    DatError::new(ErrorType::ConnQualUnavailable, Subtype::NoSubtype)
}

fn gone() -> DatError {
    DatError::new(
        ErrorType::InvalidAddress,
        Subtype::InvalidAddressUnreachable,
    )
}

/// The first port a qualifier outside 1..=65535 folds onto.
const FOLD_LO: u64 = 1024;

/// The rdma_cm port of a connection qualifier, and whether it was folded: qualifiers
/// 1..=65535 are ports of the RDMA_PS_TCP port space (librdmacm's own, apart from the
/// kernel's TCP ports); any other `q` (0, or beyond 16 bits like dapltest's `0xaffab1e + n`)
/// folds onto port `1024 + q mod 64512`, the same mapping as the tcp provider's with
/// `port_base = 0`. A folded request carries its full qualifier (see the `cm` module), so a
/// listener answers only the qualifier it was created for.
pub(crate) fn port_of(q: ConnQual) -> (u16, bool) {
    match u16::try_from(q.0) {
        Ok(p) if p != 0 => (p, false),
        // The remainder is below 64512, so the sum fits 16 bits.
        _ => (
            u16::try_from(FOLD_LO + q.0 % (65_536 - FOLD_LO)).unwrap_or(u16::MAX),
            true,
        ),
    }
}

impl Transport for VerbsIa {
    fn ia_attr(&self) -> IaAttr {
        self.ia_attr.clone()
    }

    fn provider_attr(&self) -> ProviderAttr {
        self.provider_attr.clone()
    }

    fn create_pz(&self, pz: PzId) -> DatResult<()> {
        self.shared.check_device()?;
        let pd = Pd::alloc(&self.shared.ctx).map_err(|e| {
            tracing::warn!(ia = %self.name, error = %e, "ibv_alloc_pd failed");
            DatError::resources(Subtype::ResourceProtectionDomain)
        })?;
        write(&self.shared.pds).insert(pz, Arc::new(pd));
        Ok(())
    }

    fn free_pz(&self, pz: PzId) {
        write(&self.shared.pds).remove(&pz);
    }

    fn register(
        &self,
        lmr: LmrId,
        pz: PzId,
        buf: &Arc<Buffer>,
        privs: MemPriv,
        va_type: VaType,
    ) -> DatResult<Option<MemKeys>> {
        if buf.is_empty() {
            return Err(DatError::invalid_arg(4));
        }
        if !MemPriv::all().contains(privs) {
            return Err(DatError::invalid_arg(6));
        }
        self.shared.check_device()?;
        let pd = read(&self.shared.pds)
            .get(&pz)
            .cloned()
            .ok_or_else(|| DatError::invalid_handle(Subtype::InvalidHandlePz))?;
        // Every MR may carry memory windows (`dat_rmr_bind`). A zero-based LMR's MR is
        // addressed from I/O address 0: the segments of posts name offsets (`sge`), and so do
        // the peers' RDMA requests with its rmr_context. The kernel registers an MR only
        // where its I/O address and its memory share their offset in a page, so a zero-based
        // region must start on a page boundary.
        let zero_based = va_type == VaType::ZeroBased;
        if zero_based && !buf.addr().is_multiple_of(page_size()) {
            tracing::debug!(ia = %self.name, addr = buf.addr(), "zero-based LMR not page-aligned");
            return Err(DatError::invalid_arg(3));
        }
        let access = access_flags(privs) | ACCESS_MW_BIND;
        let mr = Mr::register(&pd, buf, access, zero_based).map_err(|e| {
            tracing::warn!(ia = %self.name, error = %e, len = buf.len(), zero_based, "ibv_reg_mr failed");
            DatError::resources(Subtype::ResourceMemoryRegion)
        })?;
        let (lkey, rkey) = mr.keys();
        lock(&self.shared.mrs).insert(lmr, mr);
        Ok(Some(MemKeys {
            lmr_context: lkey,
            rmr_context: privs.is_remote().then_some(rkey),
        }))
    }

    fn deregister(&self, lmr: LmrId) {
        lock(&self.shared.mrs).remove(&lmr);
    }

    fn bind_rmr(&self, b: &RmrBind) -> DatResult<Option<u32>> {
        self.bind_mw(b)
    }

    fn unbind_rmr(&self, rmr: dat_core::types::RmrId) {
        // Deallocating the window revokes its key.
        lock(&self.shared.mws).remove(&rmr);
    }

    fn create_evd(&self, evd: EvdId, flags: EvdFlags, qlen: u32) -> DatResult<()> {
        // Connection, CR, software and async events need no verbs object; a DTO EVD is a CQ.
        if flags.contains(EvdFlags::DTO) {
            self.shared.check_device()?;
            self.shared.add_cq(Some(evd), qlen).map_err(|e| {
                tracing::warn!(ia = %self.name, error = %e, "ibv_create_cq failed");
                DatError::resources(Subtype::ResourceTevd)
            })?;
        }
        Ok(())
    }

    fn evd_poll(&self, evd: EvdId) -> Option<Arc<dyn dat_core::provider::EvdPoll>> {
        let poll = read(&self.shared.cqs).get(&evd)?.poll.clone();
        Some(Arc::new(crate::ia::EvdPoller {
            shared: self.shared.clone(),
            poll,
        }))
    }

    fn free_evd(&self, evd: EvdId) {
        self.shared.remove_cq(evd);
    }

    fn create_ep(&self, ep: EpId, cfg: &EpConfig, up: Arc<dyn EpUpcalls>) -> DatResult<()> {
        let mut eps = write(&self.shared.eps);
        if eps.len() >= self.ia_attr.max_eps as usize {
            return Err(DatError::resources(Subtype::ResourceTep));
        }
        // Each endpoint numbers its requests in a range of its own (`queue` module).
        let base = self.shared.next_wr_id() << 32;
        eps.insert(ep, Arc::new(Ep::new(ep, cfg.clone(), up, base)));
        Ok(())
    }

    fn modify_ep(&self, ep: EpId, cfg: &EpConfig) -> DatResult<()> {
        let ep = self.ep(ep)?;
        ep.st.lock().cfg = cfg.clone();
        Ok(())
    }

    fn reset_ep(&self, ep: EpId) -> DatResult<()> {
        let ep = self.ep(ep)?;
        let cm = {
            let mut st = ep.st.lock();
            let cm = self.shared.drop_cm(&mut st);
            st.phase = Phase::Idle;
            st.active = false;
            st.deadline = None;
            st.pdata.clear();
            st.cqs.clear();
            st.srq = None;
            cm
        };
        // The QP is destroyed first; then what the hardware held can go.
        drop(cm);
        ep.st.lock().forget_posted();
        Ok(())
    }

    fn free_ep(&self, ep: EpId) {
        let Some(ep) = write(&self.shared.eps).remove(&ep) else {
            return;
        };
        let cm = {
            let mut st = ep.st.lock();
            let live = st.phase.is_live();
            let cm = self.shared.drop_cm(&mut st);
            if live && let Some(cm) = &cm {
                cm.disconnect();
            }
            st.phase = Phase::Done;
            st.freed = true;
            cm
        };
        drop(cm);
        let cqs = {
            let mut st = ep.st.lock();
            st.forget_posted();
            st.recvs.clear();
            st.srq = None;
            std::mem::take(&mut st.cqs)
        };
        // With the endpoint's lock released: a poller holds its CQ's lock while it takes it.
        for slot in &cqs {
            slot.forget_ep(&ep);
        }
    }

    fn connect(
        &self,
        ep: EpId,
        remote: IaAddress,
        qual: ConnQual,
        private_data: &[u8],
        timeout: Timeout,
    ) -> DatResult<()> {
        if private_data.len() > MAX_PRIVATE_DATA as usize {
            return Err(DatError::invalid_arg(5));
        }
        if remote.is_ipv4() != self.shared.ip.is_ipv4() {
            return Err(DatError::new(
                ErrorType::InvalidAddress,
                Subtype::InvalidAddressUnsupported,
            ));
        }
        let ep = self.ep(ep)?;
        let (port, folded) = port_of(qual);
        if folded && private_data.len() > MAX_REQ_DATA_WITH_QUAL {
            // The qualifier takes 8 bytes of the REQ's private data field.
            return Err(DatError::invalid_arg(4));
        }
        self.shared.check_device()?;
        let cm = CmId::new(&self.shared.events).map_err(|e| {
            tracing::warn!(ia = %self.name, error = %e, "rdma_create_id failed");
            DatError::resources(Subtype::ResourceTep)
        })?;
        let deadline = timeout.duration().map(|d| Instant::now() + d);
        let mut st = ep.st.lock();
        st.active = true;
        st.pdata = frame_req(private_data, folded.then_some(qual.0));
        st.deadline = deadline;
        st.resolve_by = Some(Instant::now() + RESOLVE_LIMIT);
        ep.timed.store(true, Ordering::Release);
        st.phase = Phase::Resolving;
        self.shared.own_ep(&cm, ep.id);
        // RDMA does not run over the loopback interface: a loopback address names this host,
        // that is this IA's own address (as rdma_cm itself maps loopback to a local device).
        let ip = if remote.ip().is_loopback() {
            self.shared.ip
        } else {
            remote.ip()
        };
        let dst = SocketAddr::new(ip, port);
        let r = cm.resolve_addr(dst, RESOLVE_MS);
        st.cm = Some(cm);
        drop(st);
        if let Err(e) = r {
            tracing::debug!(ia = %self.name, %dst, error = %e, "rdma_resolve_addr failed");
            self.shared.fail_ep(&ep, CmFact::Unreachable, false, false);
        } else {
            // The event thread sleeps until the earliest deadline: tell it about ours.
            self.shared.wake();
        }
        Ok(())
    }

    fn listen(
        &self,
        sp: SpId,
        qual: Option<ConnQual>,
        upcalls: Arc<dyn SpUpcalls>,
    ) -> DatResult<ConnQual> {
        let port = qual.map_or(0, |q| port_of(q).0);
        self.shared.check_device()?;
        let cm = CmId::new(&self.shared.events).map_err(|e| {
            tracing::warn!(ia = %self.name, error = %e, "rdma_create_id failed");
            DatError::resources(Subtype::NoSubtype)
        })?;
        cm.bind(SocketAddr::new(self.shared.ip, port))
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EADDRINUSE) => {
                    DatError::new(ErrorType::ConnQualInUse, Subtype::NoSubtype)
                }
                _ => {
                    tracing::debug!(ia = %self.name, port, error = %e, "rdma_bind_addr failed");
                    qual_unavailable()
                }
            })?;
        cm.listen(64).map_err(|e| {
            tracing::debug!(ia = %self.name, port, error = %e, "rdma_listen failed");
            match e.raw_os_error() {
                Some(libc::EADDRINUSE) => {
                    DatError::new(ErrorType::ConnQualInUse, Subtype::NoSubtype)
                }
                _ => qual_unavailable(),
            }
        })?;
        let bound = cm.local_addr().map_or(port, |a| a.port());
        let qual = qual.unwrap_or(ConnQual(u64::from(bound)));
        self.shared.add_listener(sp, qual, cm, upcalls);
        Ok(qual)
    }

    fn unlisten(&self, sp: SpId) {
        self.shared.remove_listener(sp);
    }

    fn accept(&self, cr: CrId, ep: EpId, private_data: &[u8]) -> DatResult<()> {
        if private_data.len() > MAX_PRIVATE_DATA as usize {
            return Err(DatError::invalid_arg(4));
        }
        let ep = self.ep(ep)?;
        let pending = self.shared.take_cr(cr).ok_or_else(gone)?;
        let mut cm = pending.cm;
        let mut st = ep.st.lock();
        if let Err(e) = self.shared.attach_qp(&ep, &mut st, &mut cm) {
            tracing::warn!(ia = %self.name, error = %e, "QP creation for accept failed");
            drop(st);
            let _ = cm.reject(&[]);
            return Err(DatError::resources(Subtype::ResourceTep));
        }
        let a = &st.cfg.attr;
        let p = self.shared.conn_params(
            a.max_rdma_read_in,
            a.max_rdma_read_out,
            Some((pending.initiator_depth, pending.responder_resources)),
        );
        self.shared.own_ep(&cm, ep.id);
        st.active = false;
        st.phase = Phase::Accepting;
        let r = cm.accept(p, &frame(private_data));
        st.cm = Some(cm);
        drop(st);
        if let Err(e) = r {
            tracing::debug!(ia = %self.name, error = %e, "rdma_accept failed");
            self.shared
                .fail_ep(&ep, CmFact::AcceptCompletionError, false, false);
        }
        Ok(())
    }

    fn reject(&self, cr: CrId, private_data: &[u8]) -> DatResult<()> {
        if private_data.len() > MAX_PRIVATE_DATA as usize {
            return Err(DatError::invalid_arg(3));
        }
        if let Some(p) = self.shared.take_cr(cr)
            && let Err(e) = p.cm.reject(&frame(private_data))
        {
            tracing::debug!(ia = %self.name, error = %e, "rdma_reject failed");
        }
        Ok(())
    }

    fn disconnect(&self, ep: EpId, flags: CloseFlags) -> DatResult<()> {
        let Ok(ep) = self.ep(ep) else {
            return Ok(());
        };
        // A graceful disconnect of a connection with sends outstanding waits for them (at
        // most GRACEFUL_LIMIT); otherwise rdma_disconnect moves the QP to the error state (as
        // OFA dapl does): completions already made are delivered first, the rest is flushed.
        let (phase, abort) = {
            let mut st = ep.st.lock();
            if flags == CloseFlags::Graceful
                && st.phase == Phase::Connected
                && st.sends_outstanding()
            {
                if st.graceful_by.is_none() {
                    st.graceful_by = Some(Instant::now() + GRACEFUL_LIMIT);
                    ep.timed.store(true, Ordering::Release);
                    if st.tail_unsignalled() {
                        // No completion would come for the tail: a signalled marker behind it
                        // retires it (and the disconnect proceeds) once the device is done.
                        let qp = st.cm.as_ref().map_or(std::ptr::null_mut(), CmId::qp);
                        let id = st.sends.next_seq();
                        match post_marker(qp, id) {
                            Ok(()) => {
                                st.sends.skip();
                                st.sig.run = 0;
                            }
                            Err(e) => tracing::debug!(
                                ia = %self.name, ep = ep.id.0, error = %e,
                                "marker behind unsignalled requests not posted: waiting"
                            ),
                        }
                    }
                    drop(st);
                    self.shared.wake();
                }
                return Ok(());
            }
            (
                st.phase,
                matches!(st.phase, Phase::Resolving | Phase::Connecting),
            )
        };
        if matches!(phase, Phase::Closing | Phase::Done) {
            return Ok(());
        }
        self.shared.fail_ep(
            &ep,
            CmFact::Disconnected,
            true,
            !abort && phase != Phase::Idle,
        );
        if abort {
            let cm = self.shared.drop_cm(&mut ep.st.lock());
            drop(cm);
        }
        Ok(())
    }

    fn post(&self, ep: EpId, wr: WorkRequest) -> DatResult<()> {
        // The core posts through the endpoint's own entry (`ep_post`); this way is left for a
        // core that does not.
        let ep = self.ep(ep)?;
        post_on(&ep, &wr)
    }

    fn ep_post(&self, ep: EpId) -> Option<Arc<dyn EpPost>> {
        let ep: Arc<dyn EpPost> = self.ep(ep).ok()?;
        Some(ep)
    }

    fn create_srq(&self, srq: SrqId, cfg: &SrqConfig) -> DatResult<()> {
        self.shared.check_device()?;
        let pd = read(&self.shared.pds)
            .get(&cfg.pz)
            .cloned()
            .ok_or_else(|| DatError::invalid_handle(Subtype::InvalidHandlePz))?;
        let s = Srq::new(&pd, cfg.max_recv_dtos, cfg.max_recv_iov).map_err(|e| {
            tracing::warn!(ia = %self.name, error = %e, "ibv_create_srq failed");
            DatError::resources(Subtype::ResourceSrq)
        })?;
        write(&self.shared.srqs).insert(
            srq,
            Arc::new(SrqSlot {
                srq: Arc::new(s),
                wrs: Mutex::new(SrqSlab::default()),
            }),
        );
        Ok(())
    }

    fn srq_post_recv(&self, srq: SrqId, wr: WorkRequest) -> DatResult<()> {
        let slot = read(&self.shared.srqs)
            .get(&srq)
            .cloned()
            .ok_or_else(|| DatError::invalid_state(Subtype::NoSubtype))?;
        let mut wrs = lock(&slot.wrs);
        let id = wrs.next_id() | WR_SRQ | WR_RECV;
        post_recv(std::ptr::null_mut(), Some(slot.srq.as_ptr()), id, &wr).map_err(|e| {
            tracing::debug!(error = %e, "ibv_post_srq_recv failed");
            DatError::resources(Subtype::NoSubtype)
        })?;
        wrs.insert(id, wr);
        Ok(())
    }

    /// The device watches the limit (`IBV_SRQ_LIMIT`); `IBV_EVENT_SRQ_LIMIT_REACHED` comes
    /// back as `SrqFact::LimitReached` (`ia::device_events`).
    fn set_srq_lw(&self, srq: SrqId, low_watermark: u32) -> DatResult<bool> {
        let slot = read(&self.shared.srqs)
            .get(&srq)
            .cloned()
            .ok_or_else(|| DatError::invalid_state(Subtype::NoSubtype))?;
        slot.srq.set_limit(low_watermark).map_err(|e| {
            tracing::warn!(ia = %self.name, srq = srq.0, low_watermark, error = %e, "ibv_modify_srq (limit) failed");
            match e.raw_os_error() {
                Some(libc::EOPNOTSUPP | libc::ENOSYS) => {
                    DatError::new(ErrorType::ModelNotSupported, Subtype::NoSubtype)
                }
                Some(libc::EINVAL) => DatError::invalid_arg(2),
                _ => DatError::new(ErrorType::InternalError, Subtype::NoSubtype),
            }
        })?;
        Ok(true)
    }

    fn free_srq(&self, srq: SrqId) {
        write(&self.shared.srqs).remove(&srq);
    }

    fn progress(&self) -> bool {
        self.shared.progress()
    }

    fn progress_evd(&self, evd: EvdId) -> bool {
        self.shared.progress_evd(evd)
    }

    fn block(&self, evd: EvdId, timeout: std::time::Duration) -> bool {
        self.shared.block(evd, timeout)
    }

    fn unblock(&self, evd: EvdId) {
        self.shared.unblock(evd);
    }

    fn sleeping(&self, begins: bool) {
        self.shared.sleeping(begins);
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.shared.request_stop();
        let thread = lock(&self.thread).take();
        // Never join from the event thread itself (a close from inside an upcall).
        if let Some(t) = thread.filter(|t| t.thread().id() != std::thread::current().id())
            && t.join().is_err()
        {
            tracing::error!(ia = %self.name, "verbs event thread panicked");
        }
        self.shared.close_all();
        tracing::debug!(ia = %self.name, "verbs IA closed");
    }
}

impl Drop for VerbsIa {
    fn drop(&mut self) {
        self.close();
    }
}

/// The endpoint's own post entry: no lookup of the endpoint by id (`Transport::ep_post`).
/// An endpoint freed (`free_ep`) or whose IA closed (`Shared::close_all`) is marked so under
/// its lock, and a post then fails as `Transport::post` does for an id it no longer finds.
///
/// The endpoint takes requests lent ([`EpPost::lends`]): once the device has a request, the
/// MR it names keeps its memory reachable (see `ep::Pending`), so only a request the
/// provider keeps for later (a receive waiting for its QP, a post joining a terminal fact's
/// flushes) is copied.
impl Ep {
    /// The usual post, one segment, lent for the call: [`EpPost::post_lent`] of the request
    /// of these parts, read where they lie (`crate::req`). For the facade's direct call
    /// (`crate::direct`).
    ///
    /// # Errors
    /// As [`EpPost::post_lent`].
    #[inline(always)]
    pub fn post_lent_one(
        &self,
        op: PostOp,
        seg: &dat_core::mem::Segment,
        cookie: dat_core::types::Cookie,
        flags: dat_core::types::CompletionFlags,
    ) -> DatResult<()> {
        post_on(
            self,
            &OneSeg {
                op,
                seg,
                cookie,
                flags,
            },
        )
    }
}

impl EpPost for Ep {
    fn post(&self, wr: WorkRequest) -> DatResult<()> {
        post_on(self, &wr)
    }

    fn lends(&self) -> bool {
        true
    }

    // Inlined where the facade calls it directly (`crate::direct`).
    #[inline(always)]
    fn post_lent(&self, wr: &WorkRequest) -> DatResult<()> {
        post_on(self, wr)
    }
}

/// Posts `wr` on `ep`: to its QP when it has one and no terminal fact was reported, else
/// aside ([`post_aside`], which keeps a copy).
#[inline(always)]
fn post_on(ep: &Ep, wr: &impl Req) -> DatResult<()> {
    let mut st = ep.st.lock();
    let qp = st.cm.as_ref().map_or(std::ptr::null_mut(), CmId::qp);
    if qp.is_null() || st.phase == Phase::Done || st.freed {
        return post_aside(ep, st, qp, wr);
    }
    // The record is pushed after the post but under the lock the completion's handler
    // takes, so it waits for this push.
    if matches!(wr.op(), PostOp::Recv) {
        st.recvs.reserve_one();
        post_recv(qp, None, st.recvs.next_seq() | WR_RECV, wr).map_err(post_failed)?;
        st.recvs.push_reserved(Pending::of_ref(wr, true, true));
        return Ok(());
    }
    st.sends.reserve_one();
    let mut sig = st.sig;
    let signaled = sig.next(may_skip_signal(wr.flags(), wr.op()));
    let seq = st.sends.next_seq();
    let max_inline = st.max_inline;
    post_send(qp, &mut st.swr, seq, wr, (max_inline, signaled)).map_err(post_failed)?;
    st.sig = sig;
    st.sends.push_reserved(Pending::of_ref(wr, signaled, true));
    Ok(())
}

/// A post on an endpoint without a QP, or whose terminal fact was reported (out of the
/// post's line): refused once the endpoint is freed; a receive waits for the QP; any other
/// request, or one after the terminal fact, completes as flushed (after the fact's flushes
/// while those are being delivered, see `fail_ep`).
#[cold]
#[inline(never)]
fn post_aside(
    ep: &Ep,
    mut st: FlagGuard<'_, EpSt>,
    qp: *mut rdma_sys::ibv_qp,
    wr: &impl Req,
) -> DatResult<()> {
    if st.freed {
        return Err(DatError::invalid_state(Subtype::NoSubtype));
    }
    let wr = wr.to_request();
    let recv = matches!(wr.op, PostOp::Recv);
    if !qp.is_null() {
        // The terminal fact is reported (or being reported): the QP is in error.
        if st.flushing {
            let q = if recv { &mut st.recvs } else { &mut st.sends };
            q.reserve_one();
            q.push_reserved(Pending::kept(wr, true));
            return Ok(());
        }
    } else if recv {
        st.recvs.reserve_one();
        st.recvs.push_reserved(Pending::kept(wr, true));
        return Ok(());
    }
    drop(st);
    Shared::flush_now(ep, &wr);
    Ok(())
}

/// The error of a refused `ibv_post_send` or `ibv_post_recv` (out of the post's line).
#[cold]
#[inline(never)]
fn post_failed(e: io::Error) -> DatError {
    tracing::debug!(error = %e, "post failed");
    match e.raw_os_error() {
        Some(libc::ENOMEM) => DatError::resources(Subtype::NoSubtype),
        _ => DatError::new(ErrorType::InternalError, Subtype::NoSubtype),
    }
}

#[cfg(test)]
mod post_entry_tests {
    use std::sync::Mutex;

    use dat_core::ep::attr::{EpLimits, default_attr};
    use dat_core::mem::SegList;
    use dat_core::provider::Completion;
    use dat_core::types::{CompletionFlags, Cookie, DtoStatus};

    use super::*;

    /// Records the completions an endpoint reports.
    #[derive(Default)]
    struct Seen(Mutex<Vec<Completion>>);

    impl EpUpcalls for Seen {
        fn completion(&self, c: Completion) {
            self.0.lock().unwrap().push(c);
        }
        fn cm(&self, _fact: CmFact) {}
        fn retired(&self, _n: u32) {}
    }

    fn endpoint(seen: &Arc<Seen>) -> Arc<Ep> {
        let limits = EpLimits {
            max_message_size: 1 << 20,
            max_rdma_size: 1 << 20,
            max_dtos: 16,
            max_iov: 4,
            max_rdma_read_in: 1,
            max_rdma_read_out: 1,
            max_rdma_read_iov: 4,
            max_rdma_write_iov: 4,
        };
        let cfg = EpConfig {
            pz: None,
            recv_evd: None,
            request_evd: None,
            connect_evd: None,
            srq: None,
            attr: default_attr(&limits),
        };
        Arc::new(Ep::new(EpId(1), cfg, seen.clone(), 0))
    }

    fn request(op: PostOp, cookie: u64) -> WorkRequest {
        WorkRequest {
            op,
            segs: SegList::new(),
            cookie: Cookie(cookie),
            flags: CompletionFlags::empty(),
        }
    }

    /// Without a QP (no device needed): a send completes as flushed and a receive waits for
    /// the QP, as `Transport::post` did; once the endpoint is marked freed (as `free_ep` and
    /// the IA's close mark it) every post is refused with the code `Transport::post` gives an
    /// id it no longer finds, and reports nothing.
    #[test]
    fn the_post_entry_refuses_a_freed_endpoint() {
        let seen = Arc::new(Seen::default());
        let ep = endpoint(&seen);
        let to: Arc<dyn EpPost> = ep.clone();
        to.post(request(PostOp::Send, 7)).unwrap();
        to.post(request(PostOp::Recv, 8)).unwrap();
        {
            let got = seen.0.lock().unwrap();
            assert_eq!(got.len(), 1);
            assert_eq!(
                (got[0].cookie, got[0].status),
                (Cookie(7), DtoStatus::Flushed)
            );
        }
        assert_eq!(ep.st.lock().recvs.iter().count(), 1);
        ep.st.lock().freed = true;
        for op in [PostOp::Send, PostOp::Recv] {
            let e = to.post(request(op, 9)).unwrap_err();
            assert_eq!(e, DatError::invalid_state(Subtype::NoSubtype));
        }
        assert_eq!(seen.0.lock().unwrap().len(), 1);
        assert_eq!(ep.st.lock().recvs.iter().count(), 1);
    }
}
