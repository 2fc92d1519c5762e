//! The IAs and endpoints of the in-memory fabric: the [`Transport`] the facade drives.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::defaults::{software_ia_attr, software_provider_attr};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::provider::{
    CmFact, Completion, EpConfig, EpUpcalls, IaUpcalls, OpenError, OpenRequest, PostOp, Provider,
    SharedMemTable, SpUpcalls, SrqConfig, Transport, WorkRequest,
};
use crate::types::{
    CloseFlags, ConnQual, CrId, DtoStatus, EpId, IaAttr, ProviderAttr, PzId, SpId, SrqId, Timeout,
};

use super::{Deferred, End, Fabric, MAX_PRIVATE_DATA, Msg};

pub(super) enum Link {
    Idle,
    Connecting { deadline: Option<Duration> },
    Accepting(End),
    Connected(End),
}

pub(super) struct MemEp {
    pub(super) upcalls: Arc<dyn EpUpcalls>,
    pub(super) pz: Option<PzId>,
    pub(super) srq: Option<SrqId>,
    pub(super) link: Link,
    pub(super) recvs: VecDeque<WorkRequest>,
    /// Sends that arrived before a receive was posted, in order.
    pub(super) unmatched: VecDeque<(End, WorkRequest)>,
    /// Requests in flight (for flushing on disconnect): count only; the fabric owns them.
    pub(super) in_flight: usize,
}

impl MemEp {
    /// Reports `fact` and then flushes every posted receive (requests in flight are flushed by
    /// the fabric when they fail to deliver).
    pub(super) fn close_and_flush(&mut self, fact: CmFact, out: &mut Deferred) {
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

pub(super) struct IaState {
    pub(super) eps: HashMap<EpId, MemEp>,
    pub(super) listeners: HashMap<ConnQual, (SpId, Arc<dyn SpUpcalls>)>,
    pub(super) crs: HashMap<CrId, End>,
    pub(super) srqs: HashMap<SrqId, VecDeque<WorkRequest>>,
    pub(super) next_cr: u32,
    pub(super) next_any: u64,
    pub(super) mem: SharedMemTable,
}

/// One IA on the fabric.
pub struct MemIa {
    pub(super) fabric: Arc<Fabric>,
    pub(super) me: Weak<MemIa>,
    pub(super) address: SocketAddr,
    pub(super) name: String,
    pub(super) state: Mutex<IaState>,
    pub(super) upcalls: Arc<dyn IaUpcalls>,
}

impl MemIa {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, IaState> {
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
    pub(super) fn fail_connect(&self, ep: EpId) -> Option<Arc<dyn EpUpcalls>> {
        let mut g = self.lock();
        let e = g.eps.get_mut(&ep)?;
        if !matches!(e.link, Link::Connecting { .. }) {
            return None;
        }
        e.link = Link::Idle;
        Some(e.upcalls.clone())
    }

    pub(super) fn complete(&self, ep: EpId, c: Completion, out: &mut Deferred) {
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
