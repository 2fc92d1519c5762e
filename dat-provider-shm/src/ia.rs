//! One open shm IA: the [`Transport`] implementation, its state, and the provider thread that
//! serves connection management and target-side RDMA while the application sleeps.
//!
//! Locking: one state lock per IA (`dat_core::flag_lock::FlagLock`: no poisoning, no futex;
//! waiters spin, yield, nap).
//! Upcalls are collected while the state is held and made
//! after it is released, in the order of the tickets their batches took under the lock
//! (`turns`), so completions of one endpoint reach the core in the order they were produced
//! even when the application thread (in [`Transport::progress`]) and the provider thread
//! both move data. An upcall that calls back into the transport (the facade rejects requests
//! from inside one) runs its own upcalls inline, within its batch's turn.

use std::cell::Cell;
use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dat_core::defaults::{software_ia_attr, software_provider_attr};
use dat_core::error::{DatError, DatResult, ErrorType, Subtype};
use dat_core::idmap::IdMap;
use dat_core::mem::SegList;
use dat_core::provider::{
    CmFact, ConnRequest, EpConfig, EpUpcalls, IaUpcalls, PostOp, SharedMemTable, SpUpcalls,
    SrqConfig, Transport, WorkRequest,
};
use dat_core::srq::CountTakes;
use dat_core::types::{
    CloseFlags, ConnQual, CrId, DtoStatus, EpId, IaAddress, IaAttr, LOOPBACK_ADDRESS, NamedAttr,
    ProviderAttr, SpId, SrqId, Timeout,
};

use crate::conn::{DataPath, EpView, Fatal, Up, Ups};
use crate::rendezvous::{self, ListenError, Listener};
use crate::ring::{self, Segment};
use crate::sys::{self, Epoll, Mapping};
use crate::wire::{self, Packet};
use dat_core::flag_lock::{FlagGuard, FlagLock};

mod active;
mod close;
mod eps;
mod graveyard;
mod nap;
mod slab;
mod transport;
mod turns;

use active::Retry;
use eps::EpTable;
use graveyard::Graveyard;
pub use nap::{NapCounts, nap_counts};
use slab::Slab;
use turns::{Tickets, Turns};

/// Validated parameters of an IA.
#[derive(Clone, Debug)]
pub struct Params {
    /// Rendezvous directory.
    pub dir: PathBuf,
    /// Slots per ring.
    pub slots: u32,
    /// Bytes per slot.
    pub slot_size: u32,
    /// Cross-memory attach allowed (`rdma = "auto"`), or copy through the ring only.
    pub cma: bool,
    /// Requests up to this many bytes travel through the ring even when cross-memory
    /// attach is allowed (`rdma_inline`; at most a quarter of the ring is used).
    pub inline_max: u64,
    /// Accept peers of other user ids.
    pub allow_other_users: bool,
    /// Let a waiting application thread sleep on the rings' own wake-ups
    /// (`Transport::block`) instead of the facade's condition variable (the default).
    pub wait_in_provider: bool,
    /// How long a connect that finds nobody listening is retried (zero: never).
    pub connect_retry: Duration,
}

const TOK_WAKE: u64 = 0;
const TOK_LISTEN: u64 = 1 << 40;
const TOK_SOCK: u64 = 2 << 40;
const TOK_EFD: u64 = 3 << 40;
const TOK_MASK: u64 = (1 << 40) - 1;
/// How long an accepted socket may take to send its request.
const GREETING: Duration = Duration::from_secs(5);
/// The application polled within this window: the provider thread does not ask peers to
/// wake it (no system call per message while the application spins).
const APP_ACTIVE: Duration = Duration::from_millis(2);
/// How long the provider thread keeps polling after it served work, before it sleeps.
const PROVIDER_SPIN: Duration = Duration::from_micros(50);
/// How long a graceful disconnect waits for the requests already posted to complete (a peer
/// that posts no receive would hold a send back forever): past it the connection closes and
/// what is still outstanding is flushed.
pub(crate) const GRACEFUL_LIMIT: Duration = Duration::from_secs(2);

thread_local! {
    static DELIVERING: Cell<bool> = const { Cell::new(false) };
}

enum Phase {
    /// Requester: request sent, waiting for accept or reject.
    Requesting { deadline: Option<Instant> },
    /// Acceptor: socket accepted, request not read yet.
    Greeting { sp: SpId, deadline: Instant },
    /// Acceptor: request delivered to the consumer.
    Pending { cr: CrId },
    /// Acceptor: accept sent, waiting for the requester's ready.
    Accepting,
    /// Data flows.
    Connected,
}

struct Conn {
    sock: OwnedFd,
    phase: Phase,
    ep: Option<EpId>,
    data: Option<DataPath>,
    peer_probe: u64,
    /// The peer closed or hung up: it no longer touches our memory.
    peer_gone: bool,
    /// A graceful disconnect waits for the requests in flight until this deadline.
    closing: Option<Instant>,
}

/// A connection torn down locally while the peer may still be copying (cross-memory attach)
/// into or out of the memory of flushed RDMA requests: that memory stays alive until the
/// peer's end of the socket closes.
struct Linger {
    sock: OwnedFd,
    _segs: Vec<SegList>,
}

struct ShmEp {
    upcalls: Arc<dyn EpUpcalls>,
    cfg: EpConfig,
    recvs: VecDeque<WorkRequest>,
    conn: Option<u64>,
}

impl ShmEp {
    /// The endpoint as the data path sees it: its receives come from its SRQ if it has one.
    fn view<'a>(&'a mut self, srqs: &'a mut IdMap<SrqId, VecDeque<WorkRequest>>) -> EpView<'a> {
        let recvs = match self.cfg.srq.and_then(|s| srqs.get_mut(&s)) {
            Some(q) => q,
            None => &mut self.recvs,
        };
        EpView {
            upcalls: &self.upcalls,
            pz: self.cfg.pz,
            recvs,
        }
    }
}

struct Sp {
    listener: Listener,
    upcalls: Arc<dyn SpUpcalls>,
}

#[derive(Default)]
struct State {
    eps: EpTable<ShmEp>,
    sps: IdMap<SpId, Sp>,
    srqs: IdMap<SrqId, VecDeque<WorkRequest>>,
    conns: Slab<Conn>,
    crs: IdMap<CrId, u64>,
    deferred: Vec<(EpId, CmFact)>,
    /// Connects that found nobody listening, waiting for their next attempt.
    retries: IdMap<EpId, Retry>,
    /// Connections to tear down from the provider thread, with the fact to report.
    doomed: Vec<(u64, CmFact)>,
    lingers: IdMap<u64, Linger>,
    /// Sweeps of the rendezvous directory still due after a peer died (a dying process's
    /// descriptors close one by one, so its listener may outlive the connection's hang-up).
    resweep: Vec<Instant>,
    next_cr: u32,
    next_any: u64,
    /// Tickets of the upcall batches collected so far (see `turns`).
    tickets: Tickets,
    /// Upcalls of removed endpoints that pending batches may still name (see `graveyard`).
    graveyard: Graveyard,
}

/// What the transport and its provider thread share.
///
/// Aligned to 128 bytes (a pair of cache lines, which the adjacent-line prefetcher moves
/// together): the words every poll writes (`state`'s lock, `polled`, `turns`) share no line
/// with another allocation, such as the other IA of an in-process pair, whose thread polls
/// on another core.
#[repr(align(128))]
pub(crate) struct Shared {
    name: String,
    params: Params,
    cma_mode: bool,
    mem: SharedMemTable,
    state: FlagLock<State>,
    /// Whose turn it is to make upcalls (see `turns`).
    turns: Turns,
    epoll: Epoll,
    wake: OwnedFd,
    /// What an application thread asleep in `Transport::block` waits on: every connection's
    /// eventfd (as in `epoll`) and `app_wake`.
    app_epoll: Epoll,
    /// Ends a `Transport::block` (`Transport::unblock`).
    app_wake: OwnedFd,
    /// Non-zero while an application thread sleeps on the rings (one at a time): the
    /// provider thread then lets the peers wake it (it does not count it as polling).
    /// `nap::WAITING` for a waiter in `Transport::block`, `nap::NAPPING` for a poll's nap.
    blocked: AtomicU32,
    /// The provider thread armed the rings and sleeps until a peer wakes it (written under
    /// the state lock). A peer's wake-up is one token per arming (it clears the ring's
    /// flag) and both the provider thread and a thread in `Transport::block` watch the same
    /// eventfd: whichever drains it has consumed the other's wake-up too. A thread in
    /// `block` that drained one therefore arms the rings again while this is set, or the
    /// provider thread would sleep through the next message (a lost wake-up).
    parked: AtomicBool,
    stop: AtomicBool,
    /// Set by every `progress` call (one relaxed store: no clock read on the polling path),
    /// cleared by the provider thread.
    polled: AtomicBool,
    /// Batches of upcalls made so far (written under the upcall turn; see `nap`).
    deliveries: AtomicU64,
    probe: Box<u64>,
}

/// The state, locked for a call that may make upcalls (see [`Shared::enter`]).
struct Guard<'a> {
    st: FlagGuard<'a, State>,
}

impl std::ops::Deref for Guard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.st
    }
}

impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.st
    }
}

/// The transport of one open shm IA.
pub struct ShmIa {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Where buffers taken from an SRQ are reported (its low watermark).
    ia_upcalls: Arc<dyn IaUpcalls>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn invalid_state() -> DatError {
    DatError::invalid_state(Subtype::NoSubtype)
}

impl ShmIa {
    /// Opens an IA: prepares the rendezvous directory, sweeps stale entries, starts the
    /// provider thread.
    pub(crate) fn open(
        name: &str,
        params: Params,
        mem: SharedMemTable,
        ia_upcalls: Arc<dyn IaUpcalls>,
    ) -> std::io::Result<ShmIa> {
        rendezvous::prepare(&params.dir, !params.allow_other_users)?;
        rendezvous::sweep(&params.dir);
        let epoll = Epoll::new()?;
        let wake = sys::eventfd()?;
        epoll.add(wake.as_fd(), TOK_WAKE)?;
        let app_epoll = Epoll::new()?;
        let app_wake = sys::eventfd()?;
        app_epoll.add(app_wake.as_fd(), TOK_WAKE)?;
        let cma_mode = params.cma && sys::cma_self_probe();
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            params,
            cma_mode,
            mem,
            state: FlagLock::new(State::default()),
            turns: Turns::default(),
            epoll,
            wake,
            app_epoll,
            app_wake,
            blocked: AtomicU32::new(0),
            parked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            polled: AtomicBool::new(false),
            deliveries: AtomicU64::new(0),
            probe: Box::new(wire::PROBE_VALUE),
        });
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("dat-shm-{name}"))
            .spawn(move || s2.run())?;
        Ok(ShmIa {
            shared,
            thread: Mutex::new(Some(thread)),
            ia_upcalls,
        })
    }
}

impl Shared {
    /// Locks the state for a call that may produce upcalls ([`Shared::finish`] makes them).
    fn enter(&self) -> Guard<'_> {
        Guard {
            st: self.state.lock(),
        }
    }

    /// Releases the state and makes the collected upcalls, in order, once every batch
    /// collected before them has been made (so upcalls of one endpoint never overtake each
    /// other). A thread already making upcalls (an upcall that called back into the
    /// transport) makes these at once, within its own turn.
    fn finish(&self, g: Guard<'_>, out: &mut Ups) {
        let Guard { mut st } = g;
        if out.is_empty() {
            return;
        }
        if DELIVERING.with(Cell::get) {
            drop(st);
            out.drain(..).for_each(Up::run);
            return;
        }
        let ticket = st.tickets.take();
        drop(st);
        let _turn = self.turns.wait(ticket);
        if out.len() == 1 && matches!(out[0], Up::Done(..) | Up::Received(..) | Up::Retired(..)) {
            // One completion (a poll that found a message) or count of retired requests:
            // the facade never calls back into the transport from either upcall, so no
            // re-entry mark is needed.
            if let Some(up) = out.pop() {
                up.run();
            }
        } else {
            DELIVERING.with(|f| f.set(true));
            out.drain(..).for_each(Up::run);
            DELIVERING.with(|f| f.set(false));
        }
        self.delivered();
    }

    /// True if a poll that found work under the state lock should move it: nobody else is
    /// making upcalls or waiting to (else that thread moved data too: the poll reports
    /// nothing and the caller polls again, as it would have found the lock taken), or this
    /// thread is the one making them.
    fn may_deliver(&self, tickets: &Tickets) -> bool {
        DELIVERING.with(Cell::get) || self.turns.idle(tickets)
    }

    fn poke(&self) {
        sys::signal(self.wake.as_fd());
    }

    /// Moves data on every connected connection. Returns whether anything happened.
    fn pump_all(&self, st: &mut State, out: &mut Ups) -> bool {
        let mut any = false;
        let mut closing = false;
        let mut broken = Vec::new();
        let State {
            conns, eps, srqs, ..
        } = st;
        for (id, c) in conns.iter_mut() {
            closing |= c.closing.is_some();
            match pump_conn(c, eps, srqs, &self.mem, out) {
                Ok(moved) => any |= moved,
                Err(Fatal) => broken.push(*id),
            }
        }
        self.after_pump(st, broken, closing, out) | any
    }

    /// Tears down the connections a pump found broken, and closes those whose graceful
    /// disconnect has nothing left in flight. Returns whether any went.
    fn after_pump(&self, st: &mut State, broken: Vec<u64>, closing: bool, out: &mut Ups) -> bool {
        let any = !broken.is_empty();
        for id in broken {
            self.teardown(st, id, Some(CmFact::Broken), false, out);
        }
        any | (closing && self.finish_closing(st, out))
    }

    fn on_listen(&self, st: &mut State, sp: SpId) {
        loop {
            let Some(l) = st.sps.get(&sp) else { return };
            let sock = match sys::accept(l.listener.sock.as_fd()) {
                Ok(s) => s,
                Err(_) => return,
            };
            match sys::peer_cred(sock.as_fd()) {
                Ok((_, uid)) if uid == sys::uid() || self.params.allow_other_users => {}
                other => {
                    tracing::warn!(ia = %self.name, ?other, "shm: connection from another user refused");
                    continue;
                }
            }
            let id = st.conns.next_key();
            if self.epoll.add(sock.as_fd(), TOK_SOCK | id).is_err() {
                continue;
            }
            st.conns.insert(
                id,
                Conn {
                    sock,
                    phase: Phase::Greeting {
                        sp,
                        deadline: Instant::now() + GREETING,
                    },
                    ep: None,
                    data: None,
                    peer_probe: 0,
                    peer_gone: false,
                    closing: None,
                },
            );
        }
    }

    fn on_sock(&self, st: &mut State, id: u64, out: &mut Ups) {
        let mut buf = [0u8; 2048];
        if let Some(l) = st.lingers.get(&id) {
            if !self.linger_done(l, &mut buf) {
                return;
            }
            if let Some(l) = st.lingers.remove(&id) {
                self.epoll.remove(l.sock.as_fd());
            }
            return;
        }
        loop {
            let Some(c) = st.conns.get(&id) else { return };
            match sys::recv_packet(c.sock.as_fd(), &mut buf) {
                Ok(Some((n, fds))) => {
                    let p = Packet::decode(&buf[..n.min(buf.len())]);
                    if !self.on_packet(st, id, p, fds, out) {
                        return;
                    }
                }
                Ok(None) => {
                    self.peer_gone(st, id, false, out);
                    return;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.peer_gone(st, id, false, out);
                    return;
                }
            }
        }
    }

    /// True once the peer's end of a lingering socket has closed (packets are discarded).
    fn linger_done(&self, l: &Linger, buf: &mut [u8]) -> bool {
        loop {
            match sys::recv_packet(l.sock.as_fd(), buf) {
                Ok(Some(_)) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                Ok(None) | Err(_) => return true,
            }
        }
    }

    /// Handles one control packet; returns false if the connection is gone.
    fn on_packet(
        &self,
        st: &mut State,
        id: u64,
        p: Option<Packet>,
        fds: Vec<OwnedFd>,
        out: &mut Ups,
    ) -> bool {
        let Some(c) = st.conns.get_mut(&id) else {
            return false;
        };
        match (&c.phase, p) {
            (
                Phase::Greeting { sp, .. },
                Some(Packet::Request {
                    probe,
                    pdata,
                    slots,
                    slot_size,
                    ..
                }),
            ) => {
                let sp = *sp;
                let Some(d) = self.adopt(id, c, fds, slots, slot_size) else {
                    self.teardown(st, id, None, false, out);
                    return false;
                };
                c.data = Some(d);
                c.peer_probe = probe;
                let Some(up) = st.sps.get(&sp).map(|s| s.upcalls.clone()) else {
                    self.teardown(st, id, None, false, out);
                    return false;
                };
                st.next_cr += 1;
                let cr = CrId(st.next_cr);
                if let Some(c) = st.conns.get_mut(&id) {
                    c.phase = Phase::Pending { cr };
                }
                st.crs.insert(cr, id);
                out.push(Up::Req(
                    up,
                    Box::new(ConnRequest {
                        cr,
                        remote: LOOPBACK_ADDRESS,
                        private_data: pdata.into(),
                    }),
                ));
                true
            }
            (Phase::Requesting { .. }, Some(Packet::Accept { cma, probe, pdata })) => {
                let Some(d) = c.data.as_mut() else {
                    return false;
                };
                d.cma_out = cma && self.cma_mode;
                d.set_inline_max(self.params.inline_max);
                d.cma_in = self.cma_mode && sys::cma_probe(d.peer_pid, probe, wire::PROBE_VALUE);
                let ready = Packet::Ready { cma: d.cma_in }.encode();
                if sys::send_packet(c.sock.as_fd(), &ready, &[]).is_err() {
                    self.peer_gone(st, id, false, out);
                    return false;
                }
                c.phase = Phase::Connected;
                if let Some(ep) = c.ep.and_then(|e| st.eps.get(&e)) {
                    out.push(Up::Cm(
                        ep.upcalls.clone(),
                        CmFact::Established {
                            private_data: pdata.into(),
                        },
                    ));
                }
                true
            }
            (Phase::Requesting { .. }, Some(Packet::Reject { pdata })) => {
                self.teardown(
                    st,
                    id,
                    Some(CmFact::PeerRejected {
                        private_data: pdata.into(),
                    }),
                    false,
                    out,
                );
                false
            }
            (Phase::Accepting, Some(Packet::Ready { cma })) => {
                if let Some(d) = c.data.as_mut() {
                    d.cma_out = cma && self.cma_mode;
                    d.set_inline_max(self.params.inline_max);
                }
                c.phase = Phase::Connected;
                if let Some(ep) = c.ep.and_then(|e| st.eps.get(&e)) {
                    out.push(Up::Cm(
                        ep.upcalls.clone(),
                        CmFact::Established {
                            private_data: Box::default(),
                        },
                    ));
                }
                true
            }
            (Phase::Connected, Some(Packet::Close)) => {
                self.peer_gone(st, id, true, out);
                false
            }
            (_, p) => {
                tracing::warn!(ia = %self.name, ?p, "shm: unexpected control packet: connection dropped");
                self.peer_gone(st, id, false, out);
                false
            }
        }
    }

    /// Acceptor: maps the requester's segment and takes its eventfds.
    /// Only a size-sealed memory file is mapped (the requester cannot shrink it under us),
    /// and only as much of it as the request's geometry needs.
    fn adopt(
        &self,
        id: u64,
        c: &Conn,
        fds: Vec<OwnedFd>,
        slots: u32,
        slot_size: u32,
    ) -> Option<DataPath> {
        let [memfd, acc_efd, req_efd]: [OwnedFd; 3] = fds.try_into().ok()?;
        let (pid, _) = sys::peer_cred(c.sock.as_fd()).ok()?;
        if !sys::size_sealed(memfd.as_fd())
            || !ring::valid_geometry(slots, slot_size)
            || !sys::is_anon_inode(acc_efd.as_fd())
            || !sys::is_anon_inode(req_efd.as_fd())
        {
            return None;
        }
        let len = ring::segment_len(slots, slot_size);
        let seg = Segment::adopt(Mapping::new(memfd.as_fd(), len).ok()?)?;
        if seg.slots() != slots || seg.payload_cap() + ring::REC_HDR != slot_size as usize {
            return None;
        }
        let (tx, rx) = ring::ends(&seg, false);
        self.epoll.add(acc_efd.as_fd(), TOK_EFD | id).ok()?;
        if self.app_epoll.add(acc_efd.as_fd(), TOK_EFD | id).is_err() {
            self.epoll.remove(acc_efd.as_fd());
            return None;
        }
        Some(DataPath::new(tx, rx, acc_efd, req_efd, pid))
    }

    fn check_deadlines(&self, st: &mut State, out: &mut Ups) -> Option<Instant> {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        let mut expired = Vec::new();
        // Graceful disconnects close in `pump_all`, at the latest when their wait expires.
        for c in st.conns.values() {
            if let Some(d) = c.closing {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        for (id, c) in st.conns.iter() {
            let d = match c.phase {
                Phase::Requesting { deadline: Some(d) } | Phase::Greeting { deadline: d, .. } => d,
                _ => continue,
            };
            if d <= now {
                expired.push((*id, matches!(c.phase, Phase::Requesting { .. })));
            } else {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        for (id, requesting) in expired {
            let fact = requesting.then_some(CmFact::TimedOut);
            self.teardown(st, id, fact, false, out);
        }
        let due = st.resweep.iter().any(|t| *t <= now);
        st.resweep.retain(|t| *t > now);
        if due {
            rendezvous::sweep(&self.params.dir);
        }
        for t in &st.resweep {
            next = Some(next.map_or(*t, |n| n.min(*t)));
        }
        if !st.retries.is_empty()
            && let Some(t) = self.run_retries(st, now, out)
        {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        next
    }

    /// The provider thread.
    fn run(self: Arc<Shared>) {
        let mut tokens = Vec::new();
        let mut out = Ups::new();
        let mut spin_until = Instant::now();
        let mut active_until = spin_until;
        loop {
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            let mut st = self.enter();
            self.parked.store(false, Ordering::Relaxed);
            if !st.graveyard.is_empty() {
                st.graveyard.sweep(self.turns.made());
            }
            // A ring's wake-up drained here while a poll naps was meant for it as much
            // (both sleep on the same eventfds): it is woken below, after the pump.
            let mut drained = false;
            for t in tokens.drain(..) {
                match (t & !TOK_MASK, t & TOK_MASK) {
                    (TOK_WAKE, _) => {
                        sys::drain(self.wake.as_fd());
                    }
                    (TOK_LISTEN, sp) => self.on_listen(&mut st, SpId(sp as u32)),
                    (TOK_SOCK, id) => self.on_sock(&mut st, id, &mut out),
                    (TOK_EFD, id) => {
                        if let Some(d) = st.conns.get(&id).and_then(|c| c.data.as_ref()) {
                            drained |= sys::drain(d.my_efd.as_fd());
                        }
                    }
                    _ => {}
                }
            }
            for (ep, fact) in std::mem::take(&mut st.deferred) {
                if let Some(e) = st.eps.get(&ep) {
                    out.push(Up::Cm(e.upcalls.clone(), fact));
                }
            }
            for (id, fact) in std::mem::take(&mut st.doomed) {
                self.teardown(&mut st, id, Some(fact), false, &mut out);
            }
            let worked = self.pump_all(&mut st, &mut out) || !out.is_empty();
            let next = self.check_deadlines(&mut st, &mut out);
            let now = Instant::now();
            if self.polled.swap(false, Ordering::Relaxed) {
                active_until = now + APP_ACTIVE;
            }
            let app_active = now < active_until && self.blocked.load(Ordering::Acquire) == 0;
            // Spin (yielding) briefly after serving work while the application sleeps, so a
            // burst of one-sided operations does not pay a wake-up each; then sleep.
            if worked && !app_active {
                spin_until = now + PROVIDER_SPIN;
            }
            let spinning = now < spin_until;
            let mut timeout: i32 = if app_active { 1 } else { -1 };
            for c in st.conns.values_mut() {
                if let (Phase::Connected, Some(d)) = (&c.phase, c.data.as_mut()) {
                    if app_active || spinning {
                        d.disarm();
                    } else if d.arm() {
                        timeout = 0;
                    }
                }
            }
            if spinning || !out.is_empty() {
                timeout = 0;
            }
            if let Some(n) = next {
                let ms = n.saturating_duration_since(now).as_millis() as i32 + 1;
                timeout = if timeout < 0 { ms } else { timeout.min(ms) };
            }
            // Armed above (neither polling for an active application nor spinning): the
            // next message reaches this thread only through a peer's wake-up.
            self.parked
                .store(timeout != 0 && !app_active && !spinning, Ordering::Relaxed);
            // (Upcalls wake it in `finish`.)
            let quiet = out.is_empty();
            self.finish(st, &mut out);
            if drained && quiet && self.blocked.load(Ordering::Acquire) == nap::NAPPING {
                sys::signal(self.app_wake.as_fd());
            }
            // `close` sets `stop`, then pokes: a poke that came before this pass drained the
            // wake-up token is gone, so look again before sleeping (a later poke wakes us).
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            if timeout != 0 {
                self.epoll.wait(&mut tokens, timeout);
            } else if spinning {
                std::thread::yield_now();
            }
        }
    }

    /// Puts the upcalls of endpoints just removed from the state into the graveyard: batches
    /// collected before may name them by address (see `graveyard`).
    fn bury(&self, st: &mut State, gone: impl IntoIterator<Item = ShmEp>) {
        let (issued, made) = (st.tickets.issued(), self.turns.made());
        for e in gone {
            st.graveyard.bury(e.upcalls, issued, made);
        }
    }

    fn ep_mut(st: &mut State, ep: EpId) -> DatResult<&mut ShmEp> {
        st.eps.get_mut(&ep).ok_or_else(invalid_state)
    }
}

/// Moves data on one connection if it is connected (see [`DataPath::pump`]).
#[inline(always)]
fn pump_conn(
    c: &mut Conn,
    eps: &mut EpTable<ShmEp>,
    srqs: &mut IdMap<SrqId, VecDeque<WorkRequest>>,
    mem: &SharedMemTable,
    out: &mut Ups,
) -> Result<bool, Fatal> {
    if !matches!(c.phase, Phase::Connected) {
        return Ok(false);
    }
    let (Some(d), Some(ep)) = (c.data.as_mut(), c.ep.and_then(|e| eps.get_mut(&e))) else {
        return Ok(false);
    };
    d.pump(&mut ep.view(srqs), mem, out)
}
