//! One endpoint: its `rdma_cm_id` and QP, the work requests it has outstanding, and posting.
//!
//! Every work request of an endpoint's queue gets the next sequence number of that queue
//! (carried in its `wr_id`) and stays in the queue's ring ([`crate::queue::WrQueue`]) until
//! its work completion arrives (what the completion reports: [`Pending`]); a request flushed by the provider
//! before the hardware flushed it is marked `reported` and dropped silently when the
//! hardware's flush arrives.
//!
//! A send or RDMA write the consumer posted with `SUPPRESS` or `UNSIGNALLED` goes without
//! `IBV_SEND_SIGNALED` (the QP has `sq_sig_all = 0`), as perftest posts, except every
//! [`SIGNAL_EVERY`]th in a row: on an RC QP the completions of one send queue arrive in
//! posting order, so a work completion (success, error or flush) for a request means every
//! earlier unsignalled one succeeded (one that failed has a completion of its own), and
//! `ia::Shared::handle_wc` retires them with it. A window bind and a disconnect's marker take
//! a sequence number of the send queue too (no slot), so their completions retire the
//! requests before them. A device reclaims the send queue's slots of
//! unsignalled requests only then, so the QP gets `SIGNAL_EVERY` slots more than
//! `max_request_dtos`: the unsignalled requests not yet retired (at most `SIGNAL_EVERY - 1`)
//! and one marker never take a slot the consumer's requests could use.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use dat_core::flag_lock::FlagLock;
use dat_core::provider::{Completion, EpConfig, EpUpcalls, PostOp, WorkRequest};
use dat_core::types::{CompletionFlags, Cookie, DtoOp, DtoStatus, EpId, RmrTriplet};
use rdma_sys as sys;

use crate::cm::CmId;
use crate::queue::WrQueue;
use crate::req::Req;
use crate::verbs::{SEND_SIGNALED, send_flags};

/// Bit 63 of a `wr_id`: a receive posted to a shared receive queue.
pub const WR_SRQ: u64 = 1 << 63;
/// Bit 62 of a `wr_id`: a receive (on the endpoint's own receive queue, or an SRQ).
pub const WR_RECV: u64 = 1 << 62;

/// Bit 61 of a `wr_id`: a memory window bind (no consumer request behind it).
pub const WR_BIND: u64 = 1 << 61;

/// Bit 60 of a `wr_id`: a signalled zero-length RDMA write posted behind an unsignalled tail
/// when a graceful disconnect waits for the send queue (no consumer request behind it).
pub const WR_MARK: u64 = 1 << 60;

/// At most `SIGNAL_EVERY - 1` requests in a row go unsignalled; the QP's send queue is
/// `max_request_dtos + SIGNAL_EVERY` deep (device limits permitting, see
/// [`SignalRun::for_queue`]).
pub const SIGNAL_EVERY: u32 = 8;

/// Where an endpoint is in its connection's life, as the provider sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// No connection.
    Idle,
    /// Active: resolving the address and route.
    Resolving,
    /// Active: connect sent.
    Connecting,
    /// Passive: accept sent, waiting for ESTABLISHED.
    Accepting,
    /// Established.
    Connected,
    /// A terminal fact is being reported (successes drained, flush pending).
    Closing,
    /// The terminal fact was reported.
    Done,
}

impl Phase {
    /// True while a connection is being made or is up.
    pub fn is_live(self) -> bool {
        matches!(
            self,
            Phase::Resolving | Phase::Connecting | Phase::Accepting | Phase::Connected
        )
    }
}

/// A work request the hardware (or the provider, before the QP exists) holds: what its
/// completion reports, and the request itself only while the provider must keep its memory.
///
/// A request the device holds names its memory by the key of an MR, and the MR keeps that
/// memory: `verbs::Mr` holds the buffer and deregisters before letting it go, and a
/// deregistered MR's memory is out of the device's reach (a request still naming it
/// completes in error). So a post is lent the request (`EpPost::post_lent`), whose
/// segments the core drops when the post returns, and only this record stays: a copy of
/// the 128-byte request into the queue per post before, and its segments' drop per
/// completion.
#[derive(Debug)]
pub struct Pending {
    /// The post's cookie.
    pub cookie: Cookie,
    /// The request's local length in bytes (saturated), a success's transferred length.
    pub len: u32,
    /// The operation reported.
    pub op: DtoOp,
    /// The post's completion flags.
    pub flags: CompletionFlags,
    /// Signalled (sends): a completion of its own will arrive.
    pub signaled: bool,
    /// Given to the hardware (a receive posted before the QP exists is not).
    pub posted: bool,
    /// Reported to the consumer already (flushed by the provider).
    pub reported: bool,
    /// The request itself while the provider keeps its memory: a receive waiting for its
    /// QP, or a request kept for a terminal fact's flushes (boxed: the record of the usual
    /// post stays a few words). `None` once the device has it.
    pub kept: Option<Box<WorkRequest>>,
}

impl Pending {
    /// The record of `wr`, not given to the device, with the request kept (its memory
    /// with it) until the record goes.
    pub fn kept(wr: WorkRequest, signaled: bool) -> Pending {
        let p = Pending::of_ref(&wr, signaled, false);
        Pending {
            kept: Some(Box::new(wr)),
            ..p
        }
    }

    /// The record of `wr`, read where it lies (the post's path, where the request is lent:
    /// `dat_core::provider::EpPost::post_lent`).
    #[inline(always)]
    pub fn of_ref(wr: &impl Req, signaled: bool, posted: bool) -> Pending {
        Pending {
            cookie: wr.cookie(),
            len: u32::try_from(wr.len()).unwrap_or(u32::MAX),
            op: wr.op().dto_op(),
            flags: wr.flags(),
            signaled,
            posted,
            reported: false,
            kept: None,
        }
    }

    /// The completion of this request with `status` and `transferred` bytes.
    #[inline(always)]
    pub fn completion(&self, status: DtoStatus, transferred: u32) -> Completion {
        Completion::of(self.cookie, self.op, self.flags, status, transferred)
    }
}

/// The state of an endpoint behind its lock.
pub struct EpSt {
    /// The configuration.
    pub cfg: EpConfig,
    /// The connection's id and QP.
    pub cm: Option<CmId>,
    /// Connection phase.
    pub phase: Phase,
    /// Active side.
    pub active: bool,
    /// The framed private data of a connect, until `rdma_connect`.
    pub pdata: Vec<u8>,
    /// The consumer's connect timeout.
    pub deadline: Option<Instant>,
    /// When address and route resolution is given up (see `ia::RESOLVE_LIMIT`).
    pub resolve_by: Option<Instant>,
    /// A graceful disconnect waits for the sends outstanding, until then (see
    /// `ia::GRACEFUL_LIMIT`).
    pub graceful_by: Option<Instant>,
    /// Inline limit the QP was granted.
    pub max_inline: u32,
    /// Which requests of the send queue are signalled.
    pub sig: SignalRun,
    /// The work request the posts of sends and RDMA operations fill in ([`post_send`]).
    pub swr: SendWr,
    /// Requests on the send queue, in posting order.
    pub sends: WrQueue,
    /// Receives on the endpoint's own receive queue, in posting order (also those waiting
    /// for the QP).
    pub recvs: WrQueue,
    /// The CQs the QP uses (drained before a terminal fact).
    pub cqs: Vec<Arc<crate::ia::CqSlot>>,
    /// The SRQ the QP takes receives from.
    pub srq: Option<Arc<crate::ia::SrqSlot>>,
    /// Memory window binds posted, by `wr_id`, with their status once complete.
    pub binds: std::collections::HashMap<u64, Option<DtoStatus>>,
    /// A terminal fact's flushes are being delivered (`ia::Shared::fail_ep`): a post then
    /// joins them (kept, not given to the QP) so that its flush comes after theirs.
    pub flushing: bool,
    /// Freed (`free_ep`) or its IA closed: a post through the endpoint's own entry
    /// (`dat_core::provider::EpPost`) is refused as one by its id then is.
    pub freed: bool,
}

/// One endpoint.
pub struct Ep {
    /// Its id.
    pub id: EpId,
    /// Where its facts go.
    pub upcalls: Arc<dyn EpUpcalls>,
    /// Its state. Taken by every post and every completion, so a [`FlagLock`] rather than a
    /// `Mutex`: no poison bookkeeping (a look at the process's panic count on lock and on
    /// release, and the poison flag's check) and no wake check on release, about 10
    /// instructions per lock. A holder panicking releases it (the guard drops while
    /// unwinding) and the state is used as it is, as the poison-ignoring `lock` helper did.
    /// Nobody sleeps on it: a waiter spins, yields, then naps (`dat_core::flag_lock`); the
    /// holders' passes are short (a post's doorbell, a completion's bookkeeping, a connection
    /// step's rdma_cm call).
    ///
    /// The event thread's deadline looks only try it: a waiting thread made every later
    /// post's release a `futex` wake-up under the `Mutex` (an application thread holds the
    /// lock across its doorbell, `ibv_post_send`, on rxe a system call that runs the whole
    /// transfer; seen in `dapltest -T P` on Soft-RoCE), and a waiter that yields or naps on
    /// the poller's CPU would slow it down just as well.
    pub st: FlagLock<EpSt>,
    /// The endpoint may have a deadline (its state's `deadline`, `resolve_by` or
    /// `graceful_by`): set under [`Ep::st`] by whoever sets one (who then wakes the event
    /// thread), cleared under it by the event thread when it finds none. The event thread's
    /// deadline looks skip an endpoint without one and so never try the lock of a busy
    /// connected endpoint: one that keeps posting (and so holds the lock often) no longer
    /// makes the event thread look again every `crate::ia::DEADLINE_RETRY`, a wake-up and
    /// two context switches on the poster's CPU each time.
    pub timed: AtomicBool,
}

impl Ep {
    /// A new, unconnected endpoint whose queues number their requests from `base` on (each
    /// endpoint of an IA gets a different one: see `crate::queue`).
    pub fn new(id: EpId, cfg: EpConfig, upcalls: Arc<dyn EpUpcalls>, base: u64) -> Ep {
        Ep {
            id,
            upcalls,
            st: FlagLock::new(EpSt {
                cfg,
                cm: None,
                phase: Phase::Idle,
                active: false,
                pdata: Vec::new(),
                deadline: None,
                resolve_by: None,
                graceful_by: None,
                max_inline: 0,
                sig: SignalRun::default(),
                swr: SendWr::default(),
                sends: WrQueue::starting_at(base),
                recvs: WrQueue::starting_at(base),
                cqs: Vec::new(),
                srq: None,
                binds: std::collections::HashMap::new(),
                flushing: false,
                freed: false,
            }),
            timed: AtomicBool::new(false),
        }
    }
}

/// The run of unsignalled requests on one send queue.
#[derive(Clone, Copy, Debug, Default)]
pub struct SignalRun {
    /// Requests posted unsignalled since the last signalled one.
    pub run: u32,
    /// How many in a row may go unsignalled (0: every one is signalled), from the send queue
    /// depth the QP was granted ([`SignalRun::for_queue`]).
    pub max: u32,
}

impl SignalRun {
    /// A fresh run for a send queue of `granted` slots taking `max_request_dtos` consumer
    /// requests: as many in a row as the slots beyond the consumer's, less one for a
    /// disconnect's marker, at most `SIGNAL_EVERY - 1`.
    pub fn for_queue(granted: u32, max_request_dtos: u32) -> SignalRun {
        SignalRun {
            run: 0,
            max: granted
                .saturating_sub(max_request_dtos)
                .saturating_sub(1)
                .min(SIGNAL_EVERY - 1),
        }
    }

    /// Whether the next request on the send queue is signalled: always unless `may_skip`
    /// ([`crate::verbs::may_skip_signal`]), and then once `max` went unsignalled in a row.
    /// Call it only for a request that is then posted.
    pub fn next(&mut self, may_skip: bool) -> bool {
        if may_skip && self.run < self.max {
            self.run += 1;
            false
        } else {
            self.run = 0;
            true
        }
    }
}

impl EpSt {
    /// True when the newest request of the send queue is unsignalled and unreported: no
    /// completion will come for it unless a later signalled request is posted.
    pub fn tail_unsignalled(&self) -> bool {
        self.sends
            .newest()
            .is_some_and(|p| !p.signaled && !p.reported)
    }

    /// True while a request of the send queue has not been reported.
    pub fn sends_outstanding(&self) -> bool {
        self.sends.iter().any(|p| !p.reported)
    }

    /// Marks every unreported request flushed and returns their completions in posting order
    /// per queue (sends, then receives). Requests never given to the hardware are dropped;
    /// the others stay until the hardware's flush (or the QP's destruction).
    pub fn flush_all(&mut self) -> Vec<Completion> {
        let mut out = Vec::new();
        for q in [&mut self.sends, &mut self.recvs] {
            q.retain(|p| {
                if !p.reported {
                    out.push(p.completion(DtoStatus::Flushed, 0));
                    p.reported = true;
                }
                p.posted
            });
        }
        out
    }

    /// Forgets the requests the hardware held (after the QP was destroyed) and keeps the
    /// receives never posted (they are posted to the next QP).
    pub fn forget_posted(&mut self) {
        self.sends.clear();
        self.recvs.retain(|p| !p.posted && !p.reported);
    }
}

/// The scatter/gather entry of one segment. Its address is the one the post named, which
/// the core checked against the LMR: the MR's I/O address of the segment's first byte (its
/// virtual address, or its offset in a zero-based LMR, whose MR is registered from I/O
/// address 0). For `inline` data it is the virtual address whatever the LMR: the library
/// copies inline data from this process's memory.
#[inline]
fn sge(s: &dat_core::mem::Segment, inline: bool) -> sys::ibv_sge {
    sys::ibv_sge {
        addr: if inline {
            s.buf.as_ptr() as u64 + s.offset as u64
        } else {
            s.addr
        },
        length: u32::try_from(s.len).unwrap_or(u32::MAX),
        lkey: s.lkey,
    }
}

/// Calls `f` with the scatter/gather list of a request's segments (zero-length segments are
/// left out: some devices read a zero length as 2 GiB), its entry count, the request's
/// total length and whether it goes inline (a length from 1 to `inline_max`; 0 for requests
/// that never do). One segment, the usual post, takes one entry on the stack and no
/// collection.
#[inline(always)]
fn with_sges<R>(
    wr: &impl Req,
    inline_max: u64,
    f: impl FnOnce(*mut sys::ibv_sge, i32, u64, bool) -> R,
) -> R {
    if let [s] = wr.segs() {
        let len = s.len_u64();
        let inline = len > 0 && len <= inline_max;
        let mut one = sge(s, inline);
        return f(&mut one, i32::from(s.len > 0), len, inline);
    }
    let len = wr.len();
    let inline = len > 0 && len <= inline_max;
    let mut list: smallvec::SmallVec<[sys::ibv_sge; 4]> = wr
        .segs()
        .iter()
        .filter(|s| s.len > 0)
        .map(|s| sge(s, inline))
        .collect();
    let n = i32::try_from(list.len()).unwrap_or(i32::MAX);
    f(list.as_mut_ptr(), n, len, inline)
}

/// Posts a receive to `qp` (or, with `srq`, to the SRQ).
///
/// # Errors
/// The errno of `ibv_post_recv` / `ibv_post_srq_recv` (ENOMEM: queue full).
pub fn post_recv(
    qp: *mut sys::ibv_qp,
    srq: Option<*mut sys::ibv_srq>,
    wr_id: u64,
    wr: &impl Req,
) -> io::Result<()> {
    with_sges(wr, 0, |list, n, _, _| {
        // SAFETY: plain data; all-zero is valid.
        let mut r: sys::ibv_recv_wr = unsafe { std::mem::zeroed() };
        r.wr_id = wr_id;
        r.sg_list = list;
        r.num_sge = n;
        let mut bad: *mut sys::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: the QP (or SRQ) is live (its owner's lock is held); the work request and its
        // scatter list are valid for the call (the provider copies them); the memory they name is
        // registered and kept alive by `wr` until the completion.
        let rc = unsafe {
            match srq {
                Some(srq) => sys::ibv_post_srq_recv(srq, &mut r, &mut bad),
                None => sys::ibv_post_recv(qp, &mut r, &mut bad),
            }
        };
        crate::device::errno_result(rc)
    })
}

/// The `ibv_send_wr` an endpoint's posts of sends and RDMA operations fill in, kept with the
/// endpoint so that a post writes only the fields it sets: every other field stays zero (a
/// request zeroed on the stack per post cost seven 16-byte stores, about 26 ns under the
/// Soft-RoCE VM's emulation).
pub struct SendWr(sys::ibv_send_wr);

impl Default for SendWr {
    fn default() -> SendWr {
        // SAFETY: plain data; all-zero is valid (null pointers, zero numbers).
        SendWr(unsafe { std::mem::zeroed() })
    }
}

// SAFETY: the request's pointers (`next`, always null, and `sg_list`) are only read by the
// library during an `ibv_post_send` made under the endpoint's lock, which guards the
// request too; `sg_list` is set for each post and never dereferenced by this crate.
unsafe impl Send for SendWr {}

/// Posts a send, RDMA write or RDMA read to `qp`, with `IBV_SEND_SIGNALED` if `signal`,
/// filling in `swr` (the endpoint's [`SendWr`]).
///
/// Inlined into the endpoint's post (`transport::post_on`), which the facade inlines into its
/// own posts (`crate::direct`): a call of its own saved and restored six registers and passed
/// the request's fields through the stack, about 20 instructions per post. `wr` is a whole
/// request or the usual post's parts (`crate::req`).
///
/// # Errors
/// The errno of `ibv_post_send` (ENOMEM: queue full, EINVAL: bad request).
#[inline(always)]
pub fn post_send(
    qp: *mut sys::ibv_qp,
    swr: &mut SendWr,
    wr_id: u64,
    wr: &impl Req,
    (max_inline, signal): (u32, bool),
) -> io::Result<()> {
    use sys::ibv_wr_opcode as op;
    // The opcode and remote segment chosen by compares, not per arm of a `match` on the
    // operation. The facade calls this inlined into each of its posts (`dat`'s `direct`),
    // where the operation is a constant and all of this folds away; an `==` (`PartialEq`)
    // there was a call the compiler did not inline, which kept the request in memory.
    let op_ = wr.op();
    if matches!(op_, PostOp::Recv) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let read = matches!(op_, PostOp::RdmaRead(_));
    let remote = match op_ {
        PostOp::RdmaWrite(t) | PostOp::RdmaRead(t) => t,
        _ => RmrTriplet::default(),
    };
    let opcode = if matches!(op_, PostOp::Send) {
        op::IBV_WR_SEND
    } else if read {
        op::IBV_WR_RDMA_READ
    } else {
        op::IBV_WR_RDMA_WRITE
    };
    let inline_ok = !read;
    // Sends and RDMA writes up to `max_inline` bytes go inline.
    let inline_max = if inline_ok { u64::from(max_inline) } else { 0 };
    with_sges(
        wr,
        inline_max,
        #[inline(always)]
        |list, n, _, inline| {
            let s = &mut swr.0;
            s.wr_id = wr_id;
            s.sg_list = list;
            s.num_sge = n;
            s.opcode = opcode;
            s.send_flags = send_flags(wr.flags(), signal, inline);
            s.wr.rdma = sys::rdma_t {
                remote_addr: remote.virtual_address,
                rkey: remote.rmr_context,
            };
            let mut bad: *mut sys::ibv_send_wr = std::ptr::null_mut();
            // SAFETY: the QP is live (its owner's lock is held); the work request and its gather
            // list are valid for the call (the list is `with_sges`'s, for the call); the memory
            // named is registered, and the device reaches it through the MR the request names,
            // which keeps it (inline data is copied during the call).
            let rc = unsafe { sys::ibv_post_send(qp, s, &mut bad) };
            crate::device::errno_result(rc)
        },
    )
}

/// Posts a signalled zero-length RDMA write (`wr_id` with [`WR_MARK`]): its completion retires
/// the unsignalled requests before it. A zero-length RDMA write names no memory, so the
/// responder checks no key or address (InfiniBand C9-88) and the peer sees nothing.
///
/// # Errors
/// The errno of `ibv_post_send` (ENOMEM: queue full).
pub fn post_marker(qp: *mut sys::ibv_qp, wr_id: u64) -> io::Result<()> {
    // SAFETY: plain data; all-zero is valid (no gather list, remote address and key 0).
    let mut s: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
    s.wr_id = wr_id | WR_MARK;
    s.opcode = sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE;
    s.send_flags = SEND_SIGNALED;
    let mut bad: *mut sys::ibv_send_wr = std::ptr::null_mut();
    // SAFETY: the QP is live (its owner's lock is held); the work request is valid for the
    // call and names no memory.
    let rc = unsafe { sys::ibv_post_send(qp, &mut s, &mut bad) };
    crate::device::errno_result(rc)
}

/// Posts a type 2 memory window bind of `mw` (new key `rkey`) to `length` bytes at `addr` of
/// `mr` with `access` (`mw_access_flags`), signalled.
///
/// # Errors
/// The errno of `ibv_post_send`.
pub fn post_bind(
    qp: *mut sys::ibv_qp,
    wr_id: u64,
    mw: &crate::verbs::Mw,
    rkey: u32,
    mr: &crate::verbs::Mr,
    (addr, length, access): (u64, u64, u32),
) -> io::Result<()> {
    // SAFETY: plain data; all-zero is valid.
    let mut s: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
    s.wr_id = wr_id;
    s.opcode = sys::ibv_wr_opcode::IBV_WR_BIND_MW;
    s.send_flags = SEND_SIGNALED;
    s.bind_mw_tso_union.bind_mw = sys::bind_mw_t {
        mw: mw.as_ptr(),
        rkey,
        bind_info: sys::ibv_mw_bind_info {
            mr: mr.as_ptr(),
            addr,
            length,
            mw_access_flags: access,
        },
    };
    let mut bad: *mut sys::ibv_send_wr = std::ptr::null_mut();
    // SAFETY: the QP, window and MR are live (the caller holds them and the endpoint's lock);
    // the work request is valid for the call.
    let rc = unsafe { sys::ibv_post_send(qp, &mut s, &mut bad) };
    crate::device::errno_result(rc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_queue_keeps_room_for_the_unretired_and_a_marker() {
        let max = |granted, dtos| SignalRun::for_queue(granted, dtos).max;
        // Room for SIGNAL_EVERY more: SIGNAL_EVERY - 1 unsignalled in a row, one slot for a
        // marker.
        assert_eq!(max(16 + SIGNAL_EVERY, 16), SIGNAL_EVERY - 1);
        // A device that rounds up gives no more than SIGNAL_EVERY - 1.
        assert_eq!(max(1024, 16), SIGNAL_EVERY - 1);
        // A device at its limit: fewer, or every request signalled.
        assert_eq!(max(20, 16), 3);
        assert_eq!(max(17, 16), 0);
        assert_eq!(max(16, 16), 0);
        assert_eq!(max(8, 16), 0);
    }

    #[test]
    fn every_eighth_request_in_a_row_is_signalled() {
        let mut s = SignalRun::for_queue(32, 16);
        let got: Vec<bool> = (0..20).map(|_| s.next(true)).collect();
        let signalled: Vec<usize> = (0..20).filter(|&i| got[i]).collect();
        assert_eq!(signalled, [7, 15]);
        // A request that needs its completion is signalled and starts a new run.
        assert!(s.next(false));
        assert_eq!(s.run, 0);
        assert!(!s.next(true));
        // Without spare slots everything is signalled.
        let mut s = SignalRun::for_queue(16, 16);
        assert!((0..5).all(|_| s.next(true)));
    }
}
