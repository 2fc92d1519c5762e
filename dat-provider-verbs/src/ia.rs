//! The shared state of one open IA and its event thread.
//!
//! # Threads and waiting
//! Each IA has one thread that sleeps in `poll(2)` on the IA's rdma_cm event channel (every
//! `rdma_cm_id` of the IA is on it), an eventfd that wakes it for a new deadline or at close,
//! the device's async event descriptor (see `device_events`) and, while it has armed the CQs
//! itself, each CQ's own completion channel. It handles CM and device events, fires
//! deadlines, and delivers completions while no application thread does. Application
//! threads poll CQs themselves in [`Shared::progress`] (no system call: `ibv_poll_cq` runs in
//! user space; `completions`) and sleep in [`Shared::block`] on the channel of the CQ of the
//! EVD they wait for; while they poll or wake, the event thread leaves the CQs unarmed (see
//! `events` and `wait`).
//!
//! # Locks
//! Order: a CQ's lock, then an endpoint's lock. Completions are delivered holding their CQ's
//! lock (so they stay in CQ order whoever polls) but never an endpoint's lock; connection
//! facts are delivered with no lock held. No upcall calls back into the transport. The
//! endpoint map's read lock comes before an endpoint's lock (a post holds it for the post,
//! the event thread while it looks at deadlines); its write lock is taken with no endpoint's
//! lock held.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use dat_core::flag_lock::FlagLock;

use dat_core::idmap::IdMap;
use dat_core::provider::{IaUpcalls, SpUpcalls};
use dat_core::types::{ConnQual, CrId, EpId, EvdId, PzId, SpId, SrqId};

use crate::cm::{CmId, ConnParams, EventChannel, QpCaps};
use crate::device::{Context, Pd};
use crate::ep::{Ep, EpSt, Phase, SIGNAL_EVERY, SignalRun, WR_RECV, post_recv};
use crate::params::VerbsParams;
use crate::verbs::{Cq, Mr, Mw, Srq};

mod completions;
mod device_events;
mod events;
mod wait;

pub use completions::EvdPoller;
pub(crate) use wait::drain_eventfd;

pub(crate) use device_events::{attach, unwatch};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(PoisonError::into_inner)
}

/// How soon the event thread looks again at an endpoint whose lock was held when it looked
/// for deadlines (it never waits for that lock: see [`crate::ep::Ep::st`]): a deadline is then fired
/// at most this late. Only endpoints with a deadline pending are looked at
/// ([`crate::ep::Ep::timed`]), so a busy connected endpoint costs no retries.
pub const DEADLINE_RETRY: std::time::Duration = std::time::Duration::from_millis(16);

/// Milliseconds rdma_cm gets to resolve an address, then a route.
pub const RESOLVE_MS: i32 = 2000;

/// An application thread that polled within this is still polling: the event thread leaves
/// the CQs unarmed (no interrupt, no wake-up per completion) and looks again after this.
pub const APP_IDLE: std::time::Duration = std::time::Duration::from_millis(2);

/// The longest the event thread sleeps between two looks at an application that keeps
/// polling while one of its threads sleeps in the provider (in [`Shared::block`] or a CNO
/// wait, [`Shared::sleeping`]): the interval starts at [`APP_IDLE`] and doubles at every look
/// that finds it still polling. Each look wakes the thread, which takes the CPU from the
/// poller for a moment (a few system calls and two context switches: under emulation, as in
/// the Soft-RoCE VM, enough for the facade's pacing to count the poller as preempted). The
/// price is a later arming of the CQs once the application stops polling, for the sleeper
/// whose completions nobody then polls: at most twice this, once.
pub const APP_LOOK_MAX: std::time::Duration = std::time::Duration::from_millis(16);

/// [`APP_LOOK_MAX`] while no application thread sleeps in the provider: then nobody waits
/// for a completion the application's own polls do not take, and the looks only notice when
/// the application goes quiet, to arm the CQs for whoever sleeps next. The first sleeper
/// wakes the event thread if it sleeps longer than [`APP_LOOK_MAX`] ([`Shared::sleeping`]),
/// so the longer interval delays no waiter: it saves a polling application about 60 wake-ups
/// of the event thread a second.
pub const APP_LOOK_QUIET_MAX: std::time::Duration = std::time::Duration::from_millis(1024);

fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; the descriptor is owned by the OwnedFd below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn signal(fd: &OwnedFd) {
    signal_raw(fd.as_raw_fd());
}

fn signal_raw(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd that stays open while it is
    // registered (a waiter's, removed under the same lock before its thread can close it).
    let _ = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// How long a graceful disconnect waits for the sends outstanding (a send the peer has no
/// receive for waits forever at RNR retry count 7) before it disconnects anyway.
pub const GRACEFUL_LIMIT: std::time::Duration = std::time::Duration::from_secs(4);

/// How long address and route resolution may take together before the provider reports the
/// peer unreachable itself (rdma_cm does not always report an address it has no route to).
pub const RESOLVE_LIMIT: std::time::Duration = std::time::Duration::from_millis(3 * 2000);

/// A CQ and the lock its pollers take.
pub struct CqSlot {
    /// The CQ.
    pub cq: Arc<Cq>,
    /// The lock of the CQ's pollers: one poller at a time takes a batch off the CQ and
    /// delivers it, so that the completions reach the facade in the order the CQ gave them.
    /// A [`FlagLock`] rather than a `Mutex<()>`: a busy poll takes it on every look at an
    /// empty CQ. A poller that must have it (a waiter about to sleep, a terminal fact's
    /// drain) waits until the holder's batch is delivered. The lock also guards the
    /// endpoint of the CQ's last completion ([`LastEp`]) and the CQ as its pollers see it.
    /// Shared with the EVD's [`EvdPoller`], which holds only this.
    pub(crate) poll: Arc<CqPoll>,
}

/// A CQ's poll side ([`CqSlot::poll`]): what an EVD's [`EvdPoller`] holds, so that freeing
/// the EVD ([`CqSlot::release`]) leaves it nothing to poll and no hold on the device's CQ,
/// however long the facade keeps the poller.
pub(crate) type CqPoll = FlagLock<PollState>;

/// What a CQ's poll lock guards.
#[derive(Debug, Default)]
pub(crate) struct PollState {
    /// The endpoint of the CQ's last completion.
    pub(crate) last: LastEp,
    /// The CQ, until its EVD is freed or the IA closes (`None`: nothing to poll).
    pub(crate) cq: Option<Arc<Cq>>,
}

/// The endpoint whose QP made a CQ's last work completion, kept under the CQ's poll lock so
/// that the next completion of the same QP skips the lookup in `by_qpn` (its read lock, a hash
/// probe and a reference count: about 40 instructions per completion). Valid while
/// `Shared::qpn_gen` is unchanged, which every change of `by_qpn` bumps. A strong reference,
/// lent to the completion's delivery (a `Weak` cost every completion an upgrade's
/// compare-exchange and a release's decrement); so that a CQ does not keep a freed endpoint
/// (and the facade's upcalls behind it) alive, `free_ep` takes it back
/// ([`CqSlot::forget_ep`]), and `remove_cq` and `close_all` with the CQ ([`CqSlot::release`]).
#[derive(Default)]
pub struct LastEp {
    /// The QP number.
    qpn: u32,
    /// `Shared::qpn_gen` when `ep` was looked up (taken before the lookup).
    generation: u64,
    /// The endpoint `by_qpn` had for `qpn` then.
    ep: Option<Arc<Ep>>,
}

impl std::fmt::Debug for LastEp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LastEp")
            .field("qpn", &self.qpn)
            .field("generation", &self.generation)
            .field("ep", &self.ep.as_ref().map(|e| e.id))
            .finish()
    }
}

impl CqSlot {
    fn new(cq: Cq) -> CqSlot {
        let cq = Arc::new(cq);
        CqSlot {
            poll: Arc::new(FlagLock::new(PollState {
                last: LastEp::default(),
                cq: Some(cq.clone()),
            })),
            cq,
        }
    }

    /// Ends the polls of this CQ (its EVD is freed, or the IA closes): its pollers find
    /// nothing from now on, and an [`EvdPoller`] the facade still holds keeps neither the
    /// CQ nor its last endpoint. Waits for a poller's batch.
    pub fn release(&self) {
        let (cq, ep) = {
            let mut st = self.poll.lock();
            (st.cq.take(), st.last.ep.take())
        };
        // Dropped with no lock held.
        drop((cq, ep));
    }

    /// Takes back the CQ's reference to `ep` if it is the CQ's last endpoint (the endpoint
    /// is being freed). Waits for a poller's batch; the caller holds no endpoint lock (a
    /// poller takes one under this lock).
    pub fn forget_ep(&self, ep: &Arc<Ep>) {
        let old = {
            let mut st = self.poll.lock();
            if st.last.ep.as_ref().is_some_and(|e| Arc::ptr_eq(e, ep)) {
                st.last.ep.take()
            } else {
                None
            }
        };
        // Dropped with no lock held.
        drop(old);
    }
}

/// An SRQ and the receives posted to it.
pub struct SrqSlot {
    /// The SRQ.
    pub srq: Arc<Srq>,
    /// The receives posted to it, by `wr_id` (any order, from any endpoint).
    pub wrs: Mutex<crate::queue::SrqSlab>,
}

/// Who owns an `rdma_cm_id`.
#[derive(Clone, Copy, Debug)]
enum Owner {
    Ep(EpId),
    Listener(SpId),
    Cr(#[allow(dead_code)] CrId),
}

/// A listening service point.
pub struct Listener {
    /// The qualifier it serves (several fold onto one port).
    pub qual: ConnQual,
    cm: CmId,
    upcalls: Arc<dyn SpUpcalls>,
}

/// A connection request between CONNECT_REQUEST and the consumer's accept or reject.
pub struct CrPending {
    /// The request's id.
    pub cm: CmId,
    /// The requester's `initiator_depth` (bounds our responder resources).
    pub initiator_depth: u8,
    /// The requester's `responder_resources` (bounds our initiator depth).
    pub responder_resources: u8,
}

/// Device limits the data path needs.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `max_qp_rd_atom`.
    pub max_qp_rd_atom: u32,
    /// `max_qp_init_rd_atom`.
    pub max_qp_init_rd_atom: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `max_qp_wr`.
    pub max_qp_wr: u32,
    /// `max_cqe`.
    pub max_cqe: u32,
}

/// State shared by the transport, its thread and application threads.
pub struct Shared {
    pub(crate) name: String,
    pub(crate) params: VerbsParams,
    pub(crate) ip: IpAddr,
    pub(crate) limits: Limits,
    pub(crate) ctx: Arc<Context>,
    upcalls: Arc<dyn IaUpcalls>,
    pub(crate) events: Arc<EventChannel>,
    wake: OwnedFd,
    /// The threads in [`Shared::block`] and the unblocks kept for the next one (see
    /// [`wait::Waiters`]).
    waiters: Mutex<wait::Waiters>,
    pub(crate) stop: AtomicBool,
    /// An application thread polled since the event thread last looked (set on every
    /// [`Shared::progress`]: a store, where reading the clock would be a system call on a
    /// machine whose clock source the vDSO cannot read, as in the emulated VM).
    polled: AtomicBool,
    /// The event thread armed every CQ and watches their channels, and nobody has taken
    /// their events since.
    armed: AtomicBool,
    /// Application threads asleep in the provider: in [`Shared::block`], or in a CNO wait
    /// ([`Shared::sleeping`]).
    sleepers: AtomicU32,
    /// The event thread is (about to be) asleep for longer than [`APP_LOOK_MAX`] while the
    /// CQs are unarmed: the next sleeper wakes it.
    long_look: AtomicBool,
    /// The device is gone or failed (`DAT_ASYNC_ERROR_IA_CATASTROPHIC` was reported).
    dead: AtomicBool,
    /// An id bound to the IA's address, so that a device removal reaches an IA without
    /// connections or service points too (rdma_cm reports it on every id of the device).
    pub(crate) sentinel: Mutex<Option<CmId>>,
    pub(crate) pds: RwLock<IdMap<PzId, Arc<Pd>>>,
    pub(crate) mrs: Mutex<IdMap<dat_core::types::LmrId, Mr>>,
    pub(crate) mws: Mutex<IdMap<dat_core::types::RmrId, Mw>>,
    pub(crate) cqs: RwLock<IdMap<EvdId, Arc<CqSlot>>>,
    /// The CQs as a list progress can hold without a lock.
    snapshot: RwLock<Arc<[Arc<CqSlot>]>>,
    /// The CQ of a QP queue whose EVD is not given.
    null_cq: Mutex<Option<Arc<CqSlot>>>,
    pub(crate) srqs: RwLock<IdMap<SrqId, Arc<SrqSlot>>>,
    /// The endpoints (every post looks its endpoint up here). The maps of the IA are
    /// [`IdMap`]s: one multiplication per lookup instead of SipHash.
    pub(crate) eps: RwLock<IdMap<EpId, Arc<Ep>>>,
    /// The connected endpoints by QP number (a work completion of another QP than its CQ's
    /// last one looks its endpoint up here: [`LastEp`]).
    by_qpn: RwLock<IdMap<u32, Arc<Ep>>>,
    /// Bumped at every change of `by_qpn`, under its write lock: a [`LastEp`] of an older
    /// value is looked up again.
    qpn_gen: AtomicU64,
    ids: Mutex<IdMap<usize, Owner>>,
    pub(crate) listeners: Mutex<IdMap<SpId, Listener>>,
    pub(crate) crs: Mutex<IdMap<CrId, CrPending>>,
    next_wr: AtomicU64,
    /// Looks of an EVD at its CQ ([`Shared::progress_cq`], approximately).
    evd_polls: AtomicU32,
    next_cr: AtomicU32,
}

impl Shared {
    /// Creates the channels and the shared state; the caller starts [`Shared::run`].
    ///
    /// # Errors
    /// The errno of the channel or eventfd creation.
    pub fn new(
        name: &str,
        params: VerbsParams,
        ip: IpAddr,
        limits: Limits,
        ctx: Arc<Context>,
        upcalls: Arc<dyn IaUpcalls>,
    ) -> std::io::Result<Shared> {
        let events = Arc::new(EventChannel::new()?);
        let wake = eventfd()?;
        Ok(Shared {
            name: name.to_owned(),
            params,
            ip,
            limits,
            ctx,
            upcalls,
            events,
            wake,
            waiters: Mutex::new(wait::Waiters::default()),
            stop: AtomicBool::new(false),
            polled: AtomicBool::new(false),
            sleepers: AtomicU32::new(0),
            long_look: AtomicBool::new(false),
            armed: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            sentinel: Mutex::new(None),
            pds: RwLock::new(IdMap::default()),
            mrs: Mutex::new(IdMap::default()),
            mws: Mutex::new(IdMap::default()),
            cqs: RwLock::new(IdMap::default()),
            snapshot: RwLock::new(Arc::from(Vec::new())),
            null_cq: Mutex::new(None),
            srqs: RwLock::new(IdMap::default()),
            eps: RwLock::new(IdMap::default()),
            by_qpn: RwLock::new(IdMap::default()),
            qpn_gen: AtomicU64::new(0),
            ids: Mutex::new(IdMap::default()),
            listeners: Mutex::new(IdMap::default()),
            crs: Mutex::new(IdMap::default()),
            next_wr: AtomicU64::new(1),
            evd_polls: AtomicU32::new(0),
            next_cr: AtomicU32::new(1),
        })
    }

    /// Wakes the event thread (a new deadline, CQs to re-arm, or close).
    pub fn wake(&self) {
        signal(&self.wake);
    }

    /// A fresh `wr_id` (posting order is key order).
    pub fn next_wr_id(&self) -> u64 {
        self.next_wr.fetch_add(1, Ordering::Relaxed)
    }

    /// Creates a CQ for a DTO EVD.
    ///
    /// # Errors
    /// The errno of `ibv_create_cq`.
    pub fn add_cq(&self, evd: Option<EvdId>, qlen: u32) -> std::io::Result<Arc<CqSlot>> {
        // Room for every event the EVD may hold plus the flushes of a teardown.
        let cqe = qlen
            .saturating_mul(2)
            .max(256)
            .min(self.limits.max_cqe.max(1));
        let slot = Arc::new(CqSlot::new(Cq::new(&self.ctx, cqe)?));
        if let Some(evd) = evd {
            write(&self.cqs).insert(evd, slot.clone());
        }
        self.refresh_snapshot();
        Ok(slot)
    }

    fn refresh_snapshot(&self) {
        let mut v: Vec<Arc<CqSlot>> = read(&self.cqs).values().cloned().collect();
        if let Some(n) = lock(&self.null_cq).clone() {
            v.push(n);
        }
        *write(&self.snapshot) = Arc::from(v);
    }

    /// Releases the CQ of an EVD (QPs still on it keep it alive).
    pub fn remove_cq(&self, evd: EvdId) {
        let slot = write(&self.cqs).remove(&evd);
        if let Some(slot) = &slot {
            slot.release();
        }
        drop(slot);
        lock(&self.waiters).forget(evd);
        self.refresh_snapshot();
    }

    /// The CQ of `evd`, or the IA's spare CQ for a queue without an EVD.
    ///
    /// # Errors
    /// The errno of creating the spare CQ.
    pub fn cq_for(&self, evd: Option<EvdId>) -> std::io::Result<Arc<CqSlot>> {
        if let Some(c) = evd.and_then(|e| read(&self.cqs).get(&e).cloned()) {
            return Ok(c);
        }
        let mut n = lock(&self.null_cq);
        if let Some(c) = n.as_ref() {
            return Ok(c.clone());
        }
        let slot = Arc::new(CqSlot::new(Cq::new(&self.ctx, 256)?));
        *n = Some(slot.clone());
        drop(n);
        self.refresh_snapshot();
        Ok(slot)
    }

    /// Remembers who owns the id `key`.
    fn own(&self, key: usize, owner: Owner) {
        lock(&self.ids).insert(key, owner);
    }

    /// Forgets the id `key`.
    pub fn disown(&self, key: usize) {
        lock(&self.ids).remove(&key);
    }

    /// Records `cm` as the id of endpoint `ep`.
    pub fn own_ep(&self, cm: &CmId, ep: EpId) {
        self.own(cm.key(), Owner::Ep(ep));
    }

    /// Records `cm` as the id of listener `sp`.
    pub fn own_listener(&self, cm: &CmId, sp: SpId) {
        self.own(cm.key(), Owner::Listener(sp));
    }

    /// Connection parameters for an endpoint whose attributes ask for `read_in` / `read_out`
    /// outstanding RDMA reads, bounded by the device and by `peer` (its initiator depth and
    /// responder resources, on the passive side).
    pub fn conn_params(&self, read_in: u32, read_out: u32, peer: Option<(u8, u8)>) -> ConnParams {
        let cap = |v: u32, dev: u32| u8::try_from(v.min(dev)).unwrap_or(u8::MAX);
        let mut p = ConnParams {
            responder_resources: cap(read_in, self.limits.max_qp_rd_atom),
            initiator_depth: cap(read_out, self.limits.max_qp_init_rd_atom),
            retry_count: self.params.retry_count,
            rnr_retry_count: self.params.rnr_retry_count,
        };
        if let Some((peer_depth, peer_resources)) = peer {
            p.responder_resources = p.responder_resources.min(peer_depth);
            p.initiator_depth = p.initiator_depth.min(peer_resources);
        }
        p
    }

    /// Creates the QP of `ep` on `cm` and posts the receives waiting for it.
    ///
    /// # Errors
    /// The errno of a CQ or QP creation or of a post.
    pub fn attach_qp(&self, ep: &Arc<Ep>, st: &mut EpSt, cm: &mut CmId) -> std::io::Result<()> {
        let cfg = &st.cfg;
        let pd = cfg
            .pz
            .and_then(|p| read(&self.pds).get(&p).cloned())
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        let send = self.cq_for(cfg.request_evd)?;
        let recv = self.cq_for(cfg.recv_evd)?;
        let srq = cfg.srq.and_then(|s| read(&self.srqs).get(&s).cloned());
        let a = &cfg.attr;
        let sge = a
            .max_request_iov
            .max(a.max_rdma_read_iov)
            .max(a.max_rdma_write_iov)
            .min(self.limits.max_sge);
        let caps = QpCaps {
            // Room for the unsignalled requests not yet retired and a marker (`ep` module).
            max_send_wr: a
                .max_request_dtos
                .saturating_add(SIGNAL_EVERY)
                .min(self.limits.max_qp_wr),
            max_recv_wr: a.max_recv_dtos.min(self.limits.max_qp_wr),
            max_send_sge: sge,
            max_recv_sge: a.max_recv_iov.min(self.limits.max_sge),
            max_inline_data: self.params.max_inline_data,
        };
        let got = cm.create_qp(&pd, &send.cq, &recv.cq, srq.as_ref().map(|s| &s.srq), caps)?;
        st.max_inline = got.max_inline_data;
        st.sig = SignalRun::for_queue(got.max_send_wr, st.cfg.attr.max_request_dtos);
        st.cqs = vec![send, recv];
        st.srq = srq;
        if let Some(qpn) = cm.qp_num() {
            let mut m = write(&self.by_qpn);
            m.insert(qpn, ep.clone());
            self.qpn_gen.fetch_add(1, Ordering::AcqRel);
        }
        let qp = cm.qp();
        st.recvs.try_for_each(|seq, p| {
            if !p.posted
                && let Some(wr) = p.kept.take()
            {
                // The device has it once the post succeeds (see `ep::Pending`).
                if let Err(e) = post_recv(qp, None, seq | WR_RECV, &*wr) {
                    p.kept = Some(wr);
                    return Err(e);
                }
                p.posted = true;
                drop(wr);
            }
            Ok(())
        })
    }

    /// Destroys the id and QP of an endpoint (after its terminal fact) and forgets what the
    /// hardware held.
    pub fn drop_cm(&self, st: &mut EpSt) -> Option<CmId> {
        let cm = st.cm.take()?;
        if let Some(qpn) = cm.qp_num() {
            let mut m = write(&self.by_qpn);
            m.remove(&qpn);
            self.qpn_gen.fetch_add(1, Ordering::AcqRel);
        }
        self.disown(cm.key());
        Some(cm)
    }

    /// Stops the thread's loop (the caller joins it).
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake();
    }

    /// Releases every object in the fixed order: endpoints (QPs and ids), requests,
    /// listeners, SRQs, MRs, CQs, PDs. The channels and the context go with the last `Arc`.
    pub fn close_all(&self) {
        unwatch(self);
        drop(lock(&self.sentinel).take());
        let eps: Vec<Arc<Ep>> = write(&self.eps).drain().map(|(_, e)| e).collect();
        for ep in eps {
            let cm = {
                let mut st = ep.st.lock();
                let cm = self.drop_cm(&mut st);
                st.freed = true;
                st.forget_posted();
                st.recvs.clear();
                st.cqs.clear();
                st.srq = None;
                cm
            };
            if let Some(cm) = &cm
                && ep.st.lock().phase == Phase::Connected
            {
                cm.disconnect();
            }
            drop(cm);
        }
        // The CQs' last endpoints: an endpoint and its CQs would otherwise keep each other.
        for slot in read(&self.cqs).values().chain(lock(&self.null_cq).iter()) {
            slot.release();
        }
        {
            let mut m = write(&self.by_qpn);
            m.clear();
            self.qpn_gen.fetch_add(1, Ordering::AcqRel);
        }
        let crs: Vec<CrPending> = lock(&self.crs).drain().map(|(_, c)| c).collect();
        drop(crs);
        let ls: Vec<Listener> = lock(&self.listeners).drain().map(|(_, l)| l).collect();
        drop(ls);
        lock(&self.ids).clear();
        write(&self.srqs).clear();
        lock(&self.mws).clear();
        lock(&self.mrs).clear();
        write(&self.cqs).clear();
        *lock(&self.null_cq) = None;
        *write(&self.snapshot) = Arc::from(Vec::new());
        write(&self.pds).clear();
    }

    /// Adds a listener.
    pub fn add_listener(&self, sp: SpId, qual: ConnQual, cm: CmId, upcalls: Arc<dyn SpUpcalls>) {
        self.own_listener(&cm, sp);
        lock(&self.listeners).insert(sp, Listener { qual, cm, upcalls });
    }

    /// Removes a listener (its id is destroyed; delivered requests stay).
    pub fn remove_listener(&self, sp: SpId) {
        let l = lock(&self.listeners).remove(&sp);
        if let Some(l) = l {
            self.disown(l.cm.key());
        }
    }

    /// Takes a pending request.
    pub fn take_cr(&self, cr: CrId) -> Option<CrPending> {
        let p = lock(&self.crs).remove(&cr)?;
        self.disown(p.cm.key());
        Some(p)
    }
}
