//! A deterministic in-memory provider with a virtual clock, for tests of the core and the
//! facade. It is a test fixture, never offered to applications as a transport: it exists only
//! with the `testing` feature and only reaches a registry that a test builds by hand.
//!
//! All IAs opened from one [`MemProvider`] share a [`Fabric`]: a FIFO of messages between
//! them. Nothing crosses the fabric until somebody calls
//! [`Transport::progress`](crate::provider::Transport::progress) (which `Evd::wait` and
//! `Evd::dequeue` do) or [`Fabric::run`], so every test sees one deterministic
//! interleaving. Connect timeouts fire when [`Fabric::advance`] moves the virtual clock past
//! them. Semantics follow InfiniBand RC: receives matched in order, back-pressure when no
//! receive is posted (sends wait, nothing is dropped), remote access checked at the target
//! against its [`MemTable`](crate::mem::MemTable), errors break both sides.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::mem::{gather, scatter, total_len};
use crate::provider::{CmFact, ConnRequest, PostOp, WorkRequest};
use crate::types::{ConnQual, CrId, DtoStatus, EpId, MemPriv};

mod ia;

use ia::Link;
pub use ia::{MemIa, MemProvider};

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
