//! A deterministic in-memory provider with a virtual clock, for tests of the core and the
//! facade. It is a test fixture, never offered to applications as a transport: it exists only
//! with the `testing` feature and only reaches a registry that a test builds by hand.
//!
//! All IAs opened from one [`MemProvider`] share a [`Fabric`]: a FIFO of messages between
//! them. Nothing crosses the fabric until somebody calls [`Transport::progress`] (which
//! `Evd::wait` and `Evd::dequeue` do) or [`Fabric::run`], so every test sees one deterministic
//! interleaving. Connect timeouts fire when [`Fabric::advance`] moves the virtual clock past
//! them. Semantics follow InfiniBand RC: receives matched in order, back-pressure when no
//! receive is posted (sends wait, nothing is dropped), remote access checked at the target
//! against its [`MemTable`](crate::mem::MemTable), errors break both sides.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::defaults::{software_ia_attr, software_provider_attr};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::mem::{gather, scatter, total_len};
use crate::provider::{
    CmFact, Completion, ConnRequest, EpConfig, EpUpcalls, IaUpcalls, OpenError, OpenRequest,
    PostOp, Provider, SharedMemTable, SpUpcalls, SrqConfig, Transport, WorkRequest,
};
use crate::types::{
    CloseFlags, ConnQual, CrId, DtoStatus, EpId, IaAttr, MemPriv, ProviderAttr, PzId, SpId, SrqId,
    Timeout,
};

/// Largest private data the fabric carries.
pub const MAX_PRIVATE_DATA: u32 = 256;

type Deferred = Vec<Box<dyn FnOnce() + Send>>;

/// The shared in-memory network and its virtual clock.
#[derive(Default)]
pub struct Fabric {
    state: Mutex<FabricState>,
}

#[derive(Default)]
struct FabricState {
    now: Duration,
    ias: HashMap<IpAddr, Weak<MemIa>>,
    queue: VecDeque<Msg>,
}

/// One end of a connection: an IA and an EP on it.
#[derive(Clone)]
struct End {
    ia: Weak<MemIa>,
    ep: EpId,
}

enum Msg {
    ConnReq {
        from: End,
        from_addr: SocketAddr,
        to: IpAddr,
        qual: ConnQual,
        pdata: Box<[u8]>,
    },
    Accept {
        to: End,
        from: End,
        pdata: Box<[u8]>,
    },
    Reject {
        to: End,
        pdata: Box<[u8]>,
    },
    Disconnect {
        to: End,
    },
    /// A graceful local disconnect, queued behind the EP's requests in flight.
    Close {
        end: End,
    },
    Data {
        to: End,
        from: End,
        wr: WorkRequest,
    },
}

impl Fabric {
    /// A new, empty fabric.
    pub fn new() -> Arc<Fabric> {
        Arc::new(Fabric::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FabricState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The virtual time.
    pub fn now(&self) -> Duration {
        self.lock().now
    }

    /// Moves the virtual clock forward and fires the connect timeouts that expire.
    pub fn advance(&self, by: Duration) {
        let mut deferred: Deferred = Vec::new();
        {
            let mut st = self.lock();
            st.now += by;
            let now = st.now;
            let ias: Vec<Arc<MemIa>> = st.ias.values().filter_map(Weak::upgrade).collect();
            for ia in ias {
                let mut eps = ia.lock();
                for ep in eps.eps.values_mut() {
                    if let Link::Connecting {
                        deadline: Some(d), ..
                    } = ep.link
                        && now >= d
                    {
                        ep.link = Link::Idle;
                        let up = ep.upcalls.clone();
                        deferred.push(Box::new(move || up.cm(CmFact::TimedOut)));
                    }
                }
            }
        }
        deferred.into_iter().for_each(|f| f());
    }

    /// Delivers every queued message (and what they cause) until the fabric is quiet.
    /// Returns true if anything was delivered.
    pub fn run(&self) -> bool {
        let mut any = false;
        loop {
            let (msg, deferred) = {
                let mut st = self.lock();
                let Some(msg) = st.queue.pop_front() else {
                    break;
                };
                let mut deferred: Deferred = Vec::new();
                let follow = self.deliver(&mut st, msg, &mut deferred);
                st.queue.extend(follow);
                (true, deferred)
            };
            any |= msg;
            deferred.into_iter().for_each(|f| f());
        }
        any
    }

    fn deliver(&self, st: &mut FabricState, msg: Msg, out: &mut Deferred) -> Vec<Msg> {
        match msg {
            Msg::ConnReq {
                from,
                from_addr,
                to,
                qual,
                pdata,
            } => {
                let requester = from.ia.upgrade();
                let fail = |out: &mut Deferred, fact: CmFact| {
                    if let Some(ia) = &requester
                        && let Some(up) = ia.fail_connect(from.ep)
                    {
                        out.push(Box::new(move || up.cm(fact)));
                    }
                };
                let Some(target) = st.ias.get(&to).and_then(Weak::upgrade) else {
                    fail(out, CmFact::Unreachable);
                    return Vec::new();
                };
                let mut t = target.lock();
                let Some(sp) = t.listeners.get(&qual).cloned() else {
                    drop(t);
                    fail(out, CmFact::NonPeerRejected);
                    return Vec::new();
                };
                t.next_cr += 1;
                let cr = CrId(t.next_cr);
                t.crs.insert(cr, from);
                let req = ConnRequest {
                    cr,
                    remote: from_addr,
                    private_data: pdata,
                };
                out.push(Box::new(move || sp.1.connection_request(req)));
                Vec::new()
            }
            Msg::Accept { to, from, pdata } => {
                let Some(ia) = to.ia.upgrade() else {
                    return vec![Msg::Disconnect { to: from }];
                };
                let mut g = ia.lock();
                let Some(ep) = g.eps.get_mut(&to.ep) else {
                    return vec![Msg::Disconnect { to: from }];
                };
                if !matches!(ep.link, Link::Connecting { .. }) {
                    // The requester gave up (timeout, disconnect): tell the acceptor.
                    return vec![Msg::Disconnect { to: from }];
                }
                ep.link = Link::Connected(from.clone());
                let up = ep.upcalls.clone();
                out.push(Box::new(move || {
                    up.cm(CmFact::Established {
                        private_data: pdata,
                    })
                }));
                // The acceptor learns it is established once the requester has it (RTU).
                // Unlock first: requester and acceptor may be the same IA (loopback).
                drop(g);
                if let Some(acc) = from.ia.upgrade() {
                    let mut a = acc.lock();
                    if let Some(aep) = a.eps.get_mut(&from.ep)
                        && matches!(aep.link, Link::Accepting(_))
                    {
                        aep.link = Link::Connected(to.clone());
                        let up = aep.upcalls.clone();
                        out.push(Box::new(move || {
                            up.cm(CmFact::Established {
                                private_data: Box::default(),
                            })
                        }));
                    }
                }
                Vec::new()
            }
            Msg::Reject { to, pdata } => {
                if let Some(ia) = to.ia.upgrade()
                    && let Some(up) = ia.fail_connect(to.ep)
                {
                    out.push(Box::new(move || {
                        up.cm(CmFact::PeerRejected {
                            private_data: pdata,
                        })
                    }));
                }
                Vec::new()
            }
            Msg::Disconnect { to } => {
                if let Some(ia) = to.ia.upgrade() {
                    let mut g = ia.lock();
                    if let Some(ep) = g.eps.get_mut(&to.ep) {
                        let was = std::mem::replace(&mut ep.link, Link::Idle);
                        let fact = match was {
                            Link::Connected(_) => Some(CmFact::Disconnected),
                            Link::Accepting(_) => Some(CmFact::AcceptCompletionError),
                            _ => None,
                        };
                        if let Some(fact) = fact {
                            ep.close_and_flush(fact, out);
                        }
                    }
                }
                Vec::new()
            }
            Msg::Close { end } => {
                let Some(ia) = end.ia.upgrade() else {
                    return Vec::new();
                };
                let mut g = ia.lock();
                let Some(ep) = g.eps.get_mut(&end.ep) else {
                    return Vec::new();
                };
                let was = std::mem::replace(&mut ep.link, Link::Idle);
                ep.close_and_flush(CmFact::Disconnected, out);
                match was {
                    Link::Connected(p) | Link::Accepting(p) => vec![Msg::Disconnect { to: p }],
                    _ => Vec::new(),
                }
            }
            Msg::Data { to, from, wr } => self.deliver_data(to, from, wr, out),
        }
    }

    fn deliver_data(&self, to: End, from: End, wr: WorkRequest, out: &mut Deferred) -> Vec<Msg> {
        let (Some(tia), Some(fia)) = (to.ia.upgrade(), from.ia.upgrade()) else {
            return Vec::new();
        };
        let fail = |out: &mut Deferred, wr: &WorkRequest, status: DtoStatus| -> Vec<Msg> {
            let c = wr.completion(status, 0);
            let mut g = fia.lock();
            if let Some(ep) = g.eps.get_mut(&from.ep) {
                let up = ep.upcalls.clone();
                out.push(Box::new(move || up.completion(c)));
                if matches!(ep.link, Link::Connected(_)) {
                    ep.link = Link::Idle;
                    ep.close_and_flush(CmFact::Broken, out);
                }
            }
            vec![Msg::Disconnect { to: to.clone() }]
        };
        let mut t = tia.lock();
        let target_pz = match t.eps.get(&to.ep) {
            Some(ep) if matches!(&ep.link, Link::Connected(p) if p.ep == from.ep) => ep.pz,
            _ => {
                // Gone or reconnected: the request completes as flushed at the requester.
                drop(t);
                fia.complete(from.ep, wr.completion(DtoStatus::Flushed, 0), out);
                return Vec::new();
            }
        };
        match wr.op {
            PostOp::Send => {
                let srq = t.eps.get(&to.ep).and_then(|e| e.srq);
                let recv = match srq {
                    Some(s) => t.srqs.get_mut(&s).and_then(VecDeque::pop_front),
                    None => t.eps.get_mut(&to.ep).and_then(|e| e.recvs.pop_front()),
                };
                let Some(recv) = recv else {
                    // Receiver not ready: hold the send until a receive is posted.
                    if let Some(ep) = t.eps.get_mut(&to.ep) {
                        ep.unmatched.push_back((from, wr));
                    }
                    return Vec::new();
                };
                let len = total_len(&wr.segs);
                if len > total_len(&recv.segs) {
                    let c = recv.completion(DtoStatus::LocalLength, 0);
                    if let Some(ep) = t.eps.get_mut(&to.ep) {
                        let up = ep.upcalls.clone();
                        out.push(Box::new(move || up.completion(c)));
                        ep.link = Link::Idle;
                        ep.close_and_flush(CmFact::Broken, out);
                    }
                    drop(t);
                    let _ = fail(out, &wr, DtoStatus::RemoteResponder);
                    return Vec::new();
                }
                let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
                gather(&wr.segs, &mut bytes);
                scatter(&recv.segs, &bytes);
                let rc = recv.completion(DtoStatus::Success, len as u32);
                if let Some(ep) = t.eps.get(&to.ep) {
                    let up = ep.upcalls.clone();
                    out.push(Box::new(move || up.completion(rc)));
                }
                drop(t);
                let sc = wr.completion(DtoStatus::Success, len as u32);
                fia.complete(from.ep, sc, out);
                Vec::new()
            }
            PostOp::RdmaWrite(r) | PostOp::RdmaRead(r) => {
                let need = if matches!(wr.op, PostOp::RdmaWrite(_)) {
                    MemPriv::REMOTE_WRITE
                } else {
                    MemPriv::REMOTE_READ
                };
                let len = total_len(&wr.segs);
                let checked = match target_pz {
                    Some(pz) => t
                        .mem
                        .read()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .remote(pz, r.rmr_context, r.virtual_address, len, need),
                    None => Err(DtoStatus::RemoteAccess),
                };
                let seg = match checked {
                    Ok(seg) => seg,
                    Err(status) => {
                        if let Some(ep) = t.eps.get_mut(&to.ep) {
                            ep.link = Link::Idle;
                            ep.close_and_flush(CmFact::Broken, out);
                        }
                        drop(t);
                        return fail(out, &wr, status);
                    }
                };
                drop(t);
                let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
                if matches!(wr.op, PostOp::RdmaWrite(_)) {
                    gather(&wr.segs, &mut bytes);
                    let _ = seg.copy_from(0, &bytes);
                } else {
                    let _ = seg.copy_to(0, &mut bytes);
                    scatter(&wr.segs, &bytes);
                }
                let c = wr.completion(DtoStatus::Success, len as u32);
                fia.complete(from.ep, c, out);
                Vec::new()
            }
            PostOp::Recv => Vec::new(),
        }
    }
}

enum Link {
    Idle,
    Connecting { deadline: Option<Duration> },
    Accepting(End),
    Connected(End),
}

struct MemEp {
    upcalls: Arc<dyn EpUpcalls>,
    pz: Option<PzId>,
    srq: Option<SrqId>,
    link: Link,
    recvs: VecDeque<WorkRequest>,
    /// Sends that arrived before a receive was posted, in order.
    unmatched: VecDeque<(End, WorkRequest)>,
    /// Requests in flight (for flushing on disconnect): count only; the fabric owns them.
    in_flight: usize,
}

impl MemEp {
    /// Reports `fact` and then flushes every posted receive (requests in flight are flushed by
    /// the fabric when they fail to deliver).
    fn close_and_flush(&mut self, fact: CmFact, out: &mut Deferred) {
        let up = self.upcalls.clone();
        out.push(Box::new(move || up.cm(fact)));
        for wr in self.recvs.drain(..) {
            let c = wr.completion(DtoStatus::Flushed, 0);
            let up = self.upcalls.clone();
            out.push(Box::new(move || up.completion(c)));
        }
        for (from, wr) in self.unmatched.drain(..) {
            let c = wr.completion(DtoStatus::Flushed, 0);
            out.push(Box::new(move || {
                if let Some(ia) = from.ia.upgrade() {
                    let mut later: Deferred = Vec::new();
                    ia.complete(from.ep, c, &mut later);
                    later.into_iter().for_each(|f| f());
                }
            }));
        }
    }
}

struct IaState {
    eps: HashMap<EpId, MemEp>,
    listeners: HashMap<ConnQual, (SpId, Arc<dyn SpUpcalls>)>,
    crs: HashMap<CrId, End>,
    srqs: HashMap<SrqId, VecDeque<WorkRequest>>,
    next_cr: u32,
    next_any: u64,
    mem: SharedMemTable,
}

/// One IA on the fabric.
pub struct MemIa {
    fabric: Arc<Fabric>,
    me: Weak<MemIa>,
    address: SocketAddr,
    name: String,
    state: Mutex<IaState>,
    upcalls: Arc<dyn IaUpcalls>,
}

impl MemIa {
    fn lock(&self) -> std::sync::MutexGuard<'_, IaState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn end(&self, ep: EpId) -> End {
        End {
            ia: self.me.clone(),
            ep,
        }
    }

    /// A pending connect failed: back to idle, returns the upcalls to report through.
    fn fail_connect(&self, ep: EpId) -> Option<Arc<dyn EpUpcalls>> {
        let mut g = self.lock();
        let e = g.eps.get_mut(&ep)?;
        if !matches!(e.link, Link::Connecting { .. }) {
            return None;
        }
        e.link = Link::Idle;
        Some(e.upcalls.clone())
    }

    fn complete(&self, ep: EpId, c: Completion, out: &mut Deferred) {
        let mut g = self.lock();
        if let Some(e) = g.eps.get_mut(&ep) {
            e.in_flight = e.in_flight.saturating_sub(1);
            let up = e.upcalls.clone();
            out.push(Box::new(move || up.completion(c)));
        }
    }

    fn enqueue(&self, msg: Msg) {
        self.fabric.lock().queue.push_back(msg);
    }

    fn flush_now(&self, c: Completion, up: Arc<dyn EpUpcalls>) {
        up.completion(c);
    }
}

fn invalid_state() -> DatError {
    DatError::invalid_state(Subtype::NoSubtype)
}

impl Transport for MemIa {
    fn ia_attr(&self) -> IaAttr {
        software_ia_attr(&self.name, "mem", self.address)
    }

    fn provider_attr(&self) -> ProviderAttr {
        software_provider_attr("mem", MAX_PRIVATE_DATA)
    }

    fn create_ep(&self, ep: EpId, cfg: &EpConfig, upcalls: Arc<dyn EpUpcalls>) -> DatResult<()> {
        let mut g = self.lock();
        g.eps.insert(
            ep,
            MemEp {
                upcalls: crate::srq::CountTakes::wrap(upcalls, cfg.srq, &self.upcalls),
                pz: cfg.pz,
                srq: cfg.srq,
                link: Link::Idle,
                recvs: VecDeque::new(),
                unmatched: VecDeque::new(),
                in_flight: 0,
            },
        );
        Ok(())
    }

    fn modify_ep(&self, ep: EpId, cfg: &EpConfig) -> DatResult<()> {
        let mut g = self.lock();
        let e = g.eps.get_mut(&ep).ok_or_else(invalid_state)?;
        e.pz = cfg.pz;
        e.srq = cfg.srq;
        Ok(())
    }

    fn reset_ep(&self, ep: EpId) -> DatResult<()> {
        let mut g = self.lock();
        let e = g.eps.get_mut(&ep).ok_or_else(invalid_state)?;
        e.link = Link::Idle;
        e.unmatched.clear();
        Ok(())
    }

    fn free_ep(&self, ep: EpId) {
        let removed = self.lock().eps.remove(&ep);
        if let Some(e) = removed
            && let Link::Connected(peer) | Link::Accepting(peer) = e.link
        {
            self.enqueue(Msg::Disconnect { to: peer });
        }
    }

    fn connect(
        &self,
        ep: EpId,
        remote: SocketAddr,
        qual: ConnQual,
        private_data: &[u8],
        timeout: Timeout,
    ) -> DatResult<()> {
        if private_data.len() > MAX_PRIVATE_DATA as usize {
            return Err(DatError::invalid_arg(5));
        }
        let deadline = timeout.duration().map(|d| self.fabric.now() + d);
        {
            let mut g = self.lock();
            let e = g.eps.get_mut(&ep).ok_or_else(invalid_state)?;
            e.link = Link::Connecting { deadline };
        }
        self.enqueue(Msg::ConnReq {
            from: self.end(ep),
            from_addr: self.address,
            to: remote.ip(),
            qual,
            pdata: private_data.into(),
        });
        Ok(())
    }

    fn listen(
        &self,
        sp: SpId,
        qual: Option<ConnQual>,
        upcalls: Arc<dyn SpUpcalls>,
    ) -> DatResult<ConnQual> {
        let mut g = self.lock();
        let qual = match qual {
            Some(q) => q,
            None => loop {
                g.next_any += 1;
                let q = ConnQual(0x1_0000 + g.next_any);
                if !g.listeners.contains_key(&q) {
                    break q;
                }
            },
        };
        if g.listeners.contains_key(&qual) {
            return Err(DatError::new(ErrorType::ConnQualInUse, Subtype::NoSubtype));
        }
        g.listeners.insert(qual, (sp, upcalls));
        Ok(qual)
    }

    fn unlisten(&self, sp: SpId) {
        self.lock().listeners.retain(|_, (id, _)| *id != sp);
    }

    fn accept(&self, cr: CrId, ep: EpId, private_data: &[u8]) -> DatResult<()> {
        let requester = {
            let mut g = self.lock();
            let requester = g.crs.remove(&cr).ok_or_else(|| {
                DatError::new(
                    ErrorType::InvalidAddress,
                    Subtype::InvalidAddressUnreachable,
                )
            })?;
            let e = g.eps.get_mut(&ep).ok_or_else(invalid_state)?;
            e.link = Link::Accepting(requester.clone());
            requester
        };
        self.enqueue(Msg::Accept {
            to: requester,
            from: self.end(ep),
            pdata: private_data.into(),
        });
        Ok(())
    }

    fn reject(&self, cr: CrId, private_data: &[u8]) -> DatResult<()> {
        let requester = self.lock().crs.remove(&cr);
        if let Some(to) = requester {
            self.enqueue(Msg::Reject {
                to,
                pdata: private_data.into(),
            });
        }
        Ok(())
    }

    fn disconnect(&self, ep: EpId, flags: CloseFlags) -> DatResult<()> {
        let mut deferred: Deferred = Vec::new();
        let peer = {
            let mut g = self.lock();
            let Some(e) = g.eps.get_mut(&ep) else {
                return Ok(());
            };
            if flags == CloseFlags::Graceful
                && e.in_flight > 0
                && matches!(e.link, Link::Connected(_))
            {
                // Graceful: requests in flight complete first (they are ahead in the FIFO).
                drop(g);
                self.enqueue(Msg::Close { end: self.end(ep) });
                return Ok(());
            }
            let was = std::mem::replace(&mut e.link, Link::Idle);
            let peer = match was {
                Link::Connected(p) | Link::Accepting(p) => Some(p),
                _ => None,
            };
            e.close_and_flush(CmFact::Disconnected, &mut deferred);
            peer
        };
        if let Some(to) = peer {
            self.enqueue(Msg::Disconnect { to });
        }
        deferred.into_iter().for_each(|f| f());
        Ok(())
    }

    fn post(&self, ep: EpId, wr: WorkRequest) -> DatResult<()> {
        let mut g = self.lock();
        let e = g.eps.get_mut(&ep).ok_or_else(invalid_state)?;
        match wr.op {
            PostOp::Recv => {
                e.recvs.push_back(wr);
                // A held send can now complete: re-deliver the oldest one.
                if let Some((from, send)) = e.unmatched.pop_front() {
                    drop(g);
                    self.enqueue(Msg::Data {
                        to: self.end(ep),
                        from,
                        wr: send,
                    });
                }
                Ok(())
            }
            _ => {
                let Link::Connected(peer) = &e.link else {
                    let up = e.upcalls.clone();
                    drop(g);
                    self.flush_now(wr.completion(DtoStatus::Flushed, 0), up);
                    return Ok(());
                };
                let to = peer.clone();
                e.in_flight += 1;
                drop(g);
                self.enqueue(Msg::Data {
                    to,
                    from: self.end(ep),
                    wr,
                });
                Ok(())
            }
        }
    }

    fn create_srq(&self, srq: SrqId, _cfg: &SrqConfig) -> DatResult<()> {
        self.lock().srqs.insert(srq, VecDeque::new());
        Ok(())
    }

    fn srq_post_recv(&self, srq: SrqId, wr: WorkRequest) -> DatResult<()> {
        let mut g = self.lock();
        let q = g.srqs.get_mut(&srq).ok_or_else(invalid_state)?;
        q.push_back(wr);
        // Wake the oldest held send of any EP using this SRQ.
        let held = g
            .eps
            .iter_mut()
            .filter(|(_, e)| e.srq == Some(srq))
            .find_map(|(id, e)| e.unmatched.pop_front().map(|h| (*id, h)));
        drop(g);
        if let Some((ep, (from, send))) = held {
            self.enqueue(Msg::Data {
                to: self.end(ep),
                from,
                wr: send,
            });
        }
        Ok(())
    }

    fn free_srq(&self, srq: SrqId) {
        self.lock().srqs.remove(&srq);
    }

    fn progress(&self) -> bool {
        self.fabric.run()
    }

    fn close(&self) {
        let eps: Vec<EpId> = self.lock().eps.keys().copied().collect();
        for ep in eps {
            self.free_ep(ep);
        }
        self.fabric.lock().ias.remove(&self.address.ip());
    }
}

/// The provider: `provider = "mem"`, params `address = "<ip>"` (required, unique per fabric).
pub struct MemProvider {
    fabric: Arc<Fabric>,
}

impl MemProvider {
    /// A provider over `fabric`.
    pub fn new(fabric: Arc<Fabric>) -> Arc<MemProvider> {
        Arc::new(MemProvider { fabric })
    }
}

impl Provider for MemProvider {
    fn name(&self) -> &'static str {
        "mem"
    }

    fn open(&self, req: OpenRequest<'_>) -> Result<Arc<dyn Transport>, OpenError> {
        let bad = |m: String| {
            OpenError::new(
                DatError::new(ErrorType::InvalidParameter, Subtype::NoSubtype),
                m,
            )
        };
        let mut address = None;
        for (k, v) in req.params {
            match (k.as_str(), v.as_str()) {
                ("address", Some(s)) => {
                    address = Some(s.parse::<IpAddr>().map_err(|e| {
                        bad(format!(
                            "{}: IA `{}`: params.address `{s}`: {e}",
                            req.origin, req.ia_name
                        ))
                    })?);
                }
                _ => {
                    return Err(bad(format!(
                        "{}: IA `{}`: unknown or mistyped key `params.{k}` (the mem provider takes `address`)",
                        req.origin, req.ia_name
                    )));
                }
            }
        }
        let ip = address.ok_or_else(|| {
            bad(format!(
                "{}: IA `{}`: the mem provider needs `params.address`",
                req.origin, req.ia_name
            ))
        })?;
        let mut st = self.fabric.lock();
        if st.ias.get(&ip).and_then(Weak::upgrade).is_some() {
            return Err(OpenError::new(
                DatError::new(ErrorType::InvalidAddress, Subtype::NoSubtype),
                format!(
                    "IA `{}`: address {ip} is already open on this fabric",
                    req.ia_name
                ),
            ));
        }
        let ia = Arc::new_cyclic(|me| MemIa {
            fabric: self.fabric.clone(),
            me: me.clone(),
            address: SocketAddr::new(ip, 0),
            name: req.ia_name.to_owned(),
            state: Mutex::new(IaState {
                eps: HashMap::new(),
                listeners: HashMap::new(),
                crs: HashMap::new(),
                srqs: HashMap::new(),
                next_cr: 0,
                next_any: 0,
                mem: req.mem.clone(),
            }),
            upcalls: req.upcalls.clone(),
        });
        st.ias.insert(ip, Arc::downgrade(&ia));
        Ok(ia)
    }
}
