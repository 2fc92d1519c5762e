//! The data path of one connection: requests and responses through the two rings of its
//! segment.
//!
//! # Records
//! | kind | from | fields | payload |
//! |------|------|--------|---------|
//! | `SEND` | requester | `total`, `offset` | message bytes |
//! | `SEND_CMA` | requester | `total`, `c` iov count | requester's iovs (messages larger than a slot and than the inline size) |
//! | `WRITE` | requester | `a` rkey, `b` address, `total`, `offset` | bytes (copy mode, or up to the inline size) |
//! | `WRITE_CMA` | requester | `a`, `b`, `total`, `c` iov count | requester's iovs |
//! | `READ` | requester | `a`, `b`, `total`, `c` iov count (0: copy mode, or up to the inline size) | iovs |
//! | `SEND_ACK` | target | `a` status (an error) | |
//! | `RDMA_ACK` | target | `a` status (an error) | |
//! | `READ_DATA` | target | `total`, `offset` | bytes |
//!
//! Every record also carries `ack`, the records of the other ring its writer has consumed.
//!
//! # Completions without acknowledgement records
//! A target takes a request's records out of the ring only once it has carried the request
//! out: the message is in a receive, the write placed, the read's data written into the
//! requester's memory by cross-memory attach. So a request whose last record the target has
//! consumed has succeeded, and the target's head says so: the requester learns it from the
//! `ack` of the next record coming its way (a reply, in a ping-pong: no cache line of its
//! own), or from the head in the ring's control block when it waits for completions and no
//! record comes (it reads that word only then, and while polling only every
//! [`HEAD_POLLS`]th poll: the target writes it for every record it takes; asleep, it asks
//! to be woken when it moves).
//!
//! A request wholly in the ring is a 32-byte entry (`Sent`: cookie, length, flags,
//! operation, where it ends); its work request is kept only while the ring names its memory
//! (cross-memory attach, or the data of a read to place), else let go of at once.
//! Only an error is acknowledged by a record (`SEND_ACK`, `RDMA_ACK`, then the connection
//! breaks); an RDMA read through the ring completes with its last `READ_DATA`. Targets
//! process records strictly in order, so completions come in the order the requester
//! posted. A send that finds no receive posted stays in the ring (back-pressure, nothing
//! dropped) and holds back what follows it, as on a reliable-connected queue pair.
//!
//! Every incoming RDMA is checked with [`MemTable::remote`] at the target before a byte moves.
//! With cross-memory attach the *target* performs the single copy (`process_vm_readv` for a
//! write, `process_vm_writev` for a read) between its checked region and the requester's
//! local segments; otherwise, and for requests up to the inline size
//! ([`DataPath::set_inline_max`]: a system call costs more than copying them twice), the
//! bytes travel through the ring.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::{Arc, RwLock};

use dat_core::mem::{MemTable, SegList, Segment};
use dat_core::provider::{
    CmFact, Completion, ConnRequest, EpUpcalls, PostOp, SpUpcalls, WorkRequest,
};
use dat_core::types::{DtoOp, DtoStatus, MemPriv, PzId};

use crate::copy;
use crate::ring::{Consumer, Incoming, Producer, Rec, store_load_fence};
use crate::sys::{self, Iovs};

const SEND: u32 = 1;
const WRITE: u32 = 2;
const WRITE_CMA: u32 = 3;
const READ: u32 = 4;
const SEND_ACK: u32 = 5;
const RDMA_ACK: u32 = 6;
const READ_DATA: u32 = 7;
const SEND_CMA: u32 = 8;

/// While completions are awaited, every this many polls read the peer's head word from the
/// control block (see [`DataPath::completable`]).
const HEAD_POLLS: u32 = 16;

/// Upcalls collected under the lock (inline: no allocation per message).
pub type Ups = smallvec::SmallVec<[Up; 8]>;

/// An endpoint's upcalls named by address, without a reference count (see
/// `ia/graveyard.rs`): valid until the batch of upcalls it was collected into under the state
/// lock has been made, because an endpoint removed from the state meanwhile leaves its
/// upcalls in the IA's graveyard until then.
#[derive(Clone, Copy)]
pub struct UpcallsRef(NonNull<dyn EpUpcalls>);

impl UpcallsRef {
    /// The upcalls `u` by address.
    #[inline]
    pub fn of(u: &Arc<dyn EpUpcalls>) -> UpcallsRef {
        UpcallsRef(NonNull::from(&**u))
    }
}

/// An upcall to make once the provider's lock is released.
pub enum Up {
    /// A DTO completion.
    Done(Arc<dyn EpUpcalls>, Completion),
    /// The completion of a receive by a message (the hot path), its endpoint's upcalls named
    /// by address: no atomic increment and decrement of their `Arc` per message.
    Received(UpcallsRef, Completion),
    /// A connection fact.
    Cm(Arc<dyn EpUpcalls>, CmFact),
    /// A connection request (boxed: rare, and it would double the size of every entry).
    Req(Arc<dyn SpUpcalls>, Box<ConnRequest>),
    /// Requests posted with `SUPPRESS` that completed successfully, counted, not reported
    /// one by one (`EpUpcalls::retired`).
    Retired(Arc<dyn EpUpcalls>, u32),
}

impl Up {
    /// Makes the upcall.
    pub fn run(self) {
        match self {
            Up::Done(u, c) => u.completion(c),
            // SAFETY: collected under the state lock from an endpoint in the state, and made
            // within the turn of the batch it is in (`Shared::finish`); an endpoint removed
            // since keeps its upcalls in the graveyard until that batch has been made.
            Up::Received(u, c) => unsafe { u.0.as_ref() }.completion(c),
            Up::Cm(u, f) => u.cm(f),
            Up::Req(u, r) => u.connection_request(*r),
            Up::Retired(u, n) => u.retired(n),
        }
    }
}

/// A response queued for the requester.
enum Resp {
    Ack { kind: u32, status: DtoStatus },
    ReadData { seg: Segment, pos: u64 },
}

/// The local view of an endpoint that the data path needs.
pub struct EpView<'a> {
    /// Upcalls of the endpoint.
    pub upcalls: &'a Arc<dyn EpUpcalls>,
    /// Its protection zone.
    pub pz: Option<PzId>,
    /// Its posted receives, oldest first.
    pub recvs: &'a mut VecDeque<WorkRequest>,
}

/// The rings of a connected (or connecting) pair, and the work in flight on them.
///
/// Aligned to 128 bytes (a pair of cache lines): the ring ends' indices, written for every
/// message, share no line with another allocation (the peer's data path, in an in-process
/// pair, is written by a thread on another core).
#[repr(align(128))]
pub struct DataPath {
    tx: Producer,
    rx: Consumer,
    /// The peer's eventfd (wakes its provider thread).
    pub peer_efd: OwnedFd,
    /// Our eventfd (the peer wakes us through it).
    pub my_efd: OwnedFd,
    /// Peer process id (for cross-memory attach).
    pub peer_pid: i32,
    /// The peer may attach to our memory: our RDMA requests carry addresses.
    pub cma_out: bool,
    /// We may attach to the peer's memory (we serve its address-carrying requests).
    pub cma_in: bool,
    /// Requests up to this many bytes travel through the ring even with `cma_out` (see
    /// [`DataPath::set_inline_max`]).
    inline_max: u64,
    /// Requests posted and not wholly in the ring yet, oldest first; the first one may be
    /// partly there (`tx_pos`).
    unsent: VecDeque<WorkRequest>,
    /// Requests wholly in the ring and not completed, oldest first (they precede `unsent`).
    sent: VecDeque<Sent>,
    /// The work requests of the entries of `sent` marked `held`, in the same order.
    held: VecDeque<WorkRequest>,
    /// Requests in `sent` whose completion the consumer wants (not `SUPPRESS`).
    wanted: usize,
    /// Suppressed requests completed and let go of, not reported yet (see
    /// [`DataPath::report_quiet`]).
    quiet_done: u64,
    /// A graceful disconnect waits for every request: watch the head for all of them.
    closing: bool,
    /// Polls that looked for completions (see [`DataPath::completable`]).
    head_polls: u32,
    tx_pos: u64,
    resps: VecDeque<Resp>,
    rx_send: Option<(WorkRequest, u64, u64)>,
    rx_write: Option<(Segment, u64, u64)>,
    /// The oldest incoming record is a send waiting for a receive.
    blocked: bool,
    /// The address lists of a cross-memory copy this side serves (ours, the peer's): kept
    /// across requests, so that a request of many ranges allocates once per connection.
    cma_lists: (Iovs, Iovs),
}

/// Outcome of processing that breaks the connection.
#[derive(Debug, PartialEq, Eq)]
pub struct Fatal;

/// A cross-memory copy found the peer process gone.
#[derive(Debug, PartialEq, Eq)]
struct PeerGone;

impl DataPath {
    /// A data path over the two ring ends.
    pub fn new(
        tx: Producer,
        rx: Consumer,
        my_efd: OwnedFd,
        peer_efd: OwnedFd,
        peer_pid: i32,
    ) -> DataPath {
        DataPath {
            tx,
            rx,
            peer_efd,
            my_efd,
            peer_pid,
            cma_out: false,
            cma_in: false,
            inline_max: 0,
            unsent: VecDeque::new(),
            sent: VecDeque::new(),
            held: VecDeque::new(),
            wanted: 0,
            quiet_done: 0,
            closing: false,
            head_polls: 0,
            tx_pos: 0,
            resps: VecDeque::new(),
            rx_send: None,
            rx_write: None,
            cma_lists: (Iovs::new(), Iovs::new()),
            blocked: false,
        }
    }

    /// Sets how large a request may be and still travel through the ring when the peer may
    /// attach to our memory: at most `max` bytes, and at most a quarter of the ring (a
    /// larger request would wait for the target to empty the ring several times). A small
    /// RDMA write or read costs the target a `process_vm_readv`/`writev` system call by
    /// cross-memory attach (about 1 us here) against two copies of a few cache lines
    /// through the ring; the crossover was measured in `BENCHMARKS.md` ("small RDMA,
    /// session 5").
    pub fn set_inline_max(&mut self, max: u64) {
        let ring = u64::from(self.rx.capacity()) * self.tx.payload_cap() as u64;
        self.inline_max = max.min(ring / 4);
    }

    /// Queues a request (send or RDMA) and pushes what fits. Requests the target is known
    /// to have completed and whose completion is suppressed are let go of on the way (no
    /// upcall).
    pub fn post(&mut self, wr: WorkRequest) {
        let mut any = false;
        if self.unsent.is_empty() && self.resps.is_empty() {
            // Nothing queued before it: straight into the ring (the common case), without
            // queueing the work request first.
            self.push_now(wr, &mut any);
        } else {
            self.unsent.push_back(wr);
        }
        if !self.unsent.is_empty() {
            any |= self.push_all();
        }
        if any && self.tx.consumer_needs_wake() {
            sys::signal(self.peer_efd.as_fd());
        }
        self.retire_quiet();
    }

    /// [`DataPath::post`] of a send that fits one slot with nothing queued before it (the
    /// common case), from a reference: nothing of the work request is kept once its record
    /// is in the ring, so it is not moved (into this call, then into the push: 128 bytes
    /// each); the caller drops it. Returns false, having done nothing, for any other
    /// request, or when the ring is full: the caller then hands it to [`DataPath::post`].
    pub fn post_small(&mut self, wr: &WorkRequest) -> bool {
        let total = wr.len();
        if wr.op != PostOp::Send
            || total > self.tx.payload_cap() as u64
            || self.tx_pos != 0
            || !self.unsent.is_empty()
            || !self.resps.is_empty()
            || !push::push_small(&mut self.tx, self.rx.head(), wr, total)
        {
            return false;
        }
        let held = self.note_sent(wr, &push::Pushed::small_send(total));
        debug_assert!(!held, "a send in one record names no memory");
        if self.tx.consumer_needs_wake() {
            sys::signal(self.peer_efd.as_fd());
        }
        // The request just pushed ends past the head known: only older ones can retire (in
        // a ping-pong the poll that brought the reply retired them already).
        if self.sent.len() > 1 {
            self.retire_quiet();
        }
        true
    }

    /// True if a pump could move something: a record waits (other than a send held back for
    /// want of a receive), output is queued, or requests are complete.
    #[inline]
    pub fn has_work(&mut self) -> bool {
        (!self.blocked && self.rx.ready())
            || !self.resps.is_empty()
            || !self.unsent.is_empty()
            || self.completable()
    }

    /// A graceful disconnect waits for every request in flight: from now on the head is
    /// watched for all of them, not only those whose completion the consumer wants.
    pub fn set_closing(&mut self) {
        self.closing = true;
    }

    /// True if the completions of requests in the ring are awaited: then the head in the
    /// control block is read when no record brings it.
    fn watching(&self) -> bool {
        (self.wanted > 0 || self.closing) && !self.sent.is_empty()
    }

    /// True if the oldest request in the ring is complete (refreshing the head from the
    /// control block first, every [`HEAD_POLLS`] calls, when completions are awaited).
    fn completable(&mut self) -> bool {
        if self.watching() {
            // The peer writes that word for every record it takes: read on every poll, its
            // line would cross between the cores for every message. Records coming back
            // carry the head anyway (`Rec::ack`).
            self.head_polls = self.head_polls.wrapping_add(1);
            if self.head_polls.is_multiple_of(HEAD_POLLS) {
                self.tx.refresh_acked();
            }
        }
        self.sent
            .front()
            .is_some_and(|s| !s.by_data && s.end <= self.tx.acked())
    }

    /// True if the oldest incoming record is a send that waits for a receive (only a posted
    /// receive can release it).
    pub fn held_back(&self) -> bool {
        self.blocked
    }

    /// Requests posted and not yet completed.
    pub fn outstanding(&self) -> usize {
        self.sent.len() + self.unsent.len()
    }

    /// Processes incoming records, then pushes queued output. Returns whether anything moved,
    /// or [`Fatal`] when the connection must break (responses already queued are pushed).
    #[inline(always)]
    pub fn pump(
        &mut self,
        ep: &mut EpView<'_>,
        mem: &RwLock<MemTable>,
        out: &mut Ups,
    ) -> Result<bool, Fatal> {
        let r = self.take_records(ep, mem, out, true);
        // A record that arrived brought the head along; otherwise (a wake-up, a periodic
        // look) the word itself is read when completions are awaited.
        if self.watching() && r != Ok(true) {
            self.tx.refresh_acked();
        }
        let retired = self.retire(ep.upcalls, out);
        // One fence covers both halves of the wake-up protocol: the slots handed back (a
        // producer starved for room, or watching for completions) and the records published
        // (a consumer asleep). A peer asleep is also woken when its records were taken: it
        // may have posted requests after it armed, and their completions are the head it
        // did not ask to watch (an acknowledgement record used to wake it).
        let released = self.rx.publish_head();
        let pushed = (!self.resps.is_empty() || !self.unsent.is_empty()) && self.push_all();
        if released || pushed {
            store_load_fence();
            let starved = released && self.rx.producer_starved();
            if self.tx.consumer_sleeping() | starved {
                sys::signal(self.peer_efd.as_fd());
            }
        }
        r.map(|got| got || pushed || retired)
    }

    /// Takes in what a departed peer had published: its messages and the responses to our
    /// requests. Its own RDMA requests are not served: it has flushed them, may have released
    /// their memory, and its process id may already name another process.
    /// The requests it had carried out (its last head) complete successfully.
    pub fn drain(&mut self, ep: &mut EpView<'_>, mem: &RwLock<MemTable>, out: &mut Ups) {
        let _ = self.receive(ep, mem, out, false);
        self.tx.refresh_acked();
        self.retire(ep.upcalls, out);
    }

    /// Prepares to sleep: returns true if work arrived meanwhile (a send held back for want
    /// of a receive is not work: only a posted receive releases it). When completions are
    /// awaited, also asks the peer to wake us when its head moves.
    pub fn arm(&mut self) -> bool {
        let mut ready = self.rx.arm() && !self.blocked;
        if self.watching() {
            ready |= self.tx.watch_head();
        }
        ready || self.completable()
    }

    /// Announces the CPU this side's polling thread runs on (`None`: it sleeps in a wait) and
    /// returns true if the peer's polling thread announced the same one: both poll on one
    /// CPU, where spinning only keeps the CPU from the peer (see `ia::nap`).
    pub fn share_cpu(&mut self, cpu: Option<u32>) -> bool {
        self.rx.announce_cpu(cpu);
        cpu.is_some() && self.tx.consumer_cpu() == cpu
    }

    /// True when a poll that takes records should announce its CPU (every
    /// [`crate::ring::ANNOUNCE_EVERY`]th, see `Consumer::announce_due`).
    #[inline]
    pub fn announce_due(&mut self) -> bool {
        self.rx.announce_due()
    }

    /// Announces the CPU this side's polling thread runs on (see [`DataPath::share_cpu`]).
    #[inline]
    pub fn announce_cpu(&mut self, cpu: Option<u32>) {
        self.rx.announce_cpu(cpu);
    }

    /// Withdraws the wake-up request.
    pub fn disarm(&mut self) {
        self.rx.disarm();
    }

    /// Completes everything outstanding as flushed: requests in posting order, then the
    /// partially received message's receive. Returns the local memory of RDMA requests the
    /// peer may still be copying into or out of by cross-memory attach: the caller keeps it
    /// alive until the peer has let go of the connection.
    /// Without `upcalls` (the endpoint is gone) nothing is reported.
    pub fn flush_all(
        &mut self,
        upcalls: Option<&Arc<dyn EpUpcalls>>,
        out: &mut Ups,
    ) -> Vec<SegList> {
        if let Some(u) = upcalls {
            self.report_quiet(u, out);
            for s in &self.sent {
                out.push(Up::Done(u.clone(), s.completion(DtoStatus::Flushed, 0)));
            }
            for wr in &self.unsent {
                out.push(Up::Done(u.clone(), wr.completion(DtoStatus::Flushed, 0)));
            }
        }
        // Only held requests named their memory in the ring.
        let keep = if self.cma_out {
            self.held.drain(..).map(|wr| wr.segs).collect()
        } else {
            Vec::new()
        };
        if let (Some((wr, _, _)), Some(u)) = (self.rx_send.take(), upcalls) {
            out.push(Up::Done(u.clone(), wr.completion(DtoStatus::Flushed, 0)));
        }
        self.sent.clear();
        self.held.clear();
        self.unsent.clear();
        self.wanted = 0;
        self.quiet_done = 0;
        self.tx_pos = 0;
        self.resps.clear();
        self.rx_write = None;
        keep
    }

    fn receive(
        &mut self,
        ep: &mut EpView<'_>,
        mem: &RwLock<MemTable>,
        out: &mut Ups,
        serve: bool,
    ) -> Result<bool, Fatal> {
        let r = self.take_records(ep, mem, out, serve);
        // The slots taken are handed back to the producer in one go.
        if self.rx.publish() {
            sys::signal(self.peer_efd.as_fd());
        }
        r
    }

    fn take_records(
        &mut self,
        ep: &mut EpView<'_>,
        mem: &RwLock<MemTable>,
        out: &mut Ups,
        serve: bool,
    ) -> Result<bool, Fatal> {
        let mut any = false;
        self.blocked = false;
        // At most one ring's worth per call: a peer that keeps publishing cannot hold us here.
        for _ in 0..self.rx.capacity() {
            let inc = match self.rx.peek() {
                Ok(Some(i)) => i,
                Ok(None) => return Ok(any),
                Err(_) => {
                    tracing::warn!("shm: malformed record from the peer: connection broken");
                    return Err(Fatal);
                }
            };
            if self.tx.note_acked(inc.rec.ack).is_err() {
                tracing::warn!("shm: the peer acknowledged records never sent: connection broken");
                return Err(Fatal);
            }
            if !serve && matches!(inc.rec.kind, WRITE | WRITE_CMA | READ) {
                self.rx.consume();
                continue;
            }
            match self.handle(inc, ep, mem, out)? {
                false => {
                    // Held back: no receive posted.
                    self.blocked = true;
                    return Ok(any);
                }
                true => {
                    any = true;
                    self.rx.consume();
                }
            }
        }
        Ok(any)
    }

    /// Handles one record; `Ok(false)` leaves it in the ring.
    fn handle(
        &mut self,
        inc: Incoming,
        ep: &mut EpView<'_>,
        mem: &RwLock<MemTable>,
        out: &mut Ups,
    ) -> Result<bool, Fatal> {
        let r = inc.rec;
        let len = u64::from(r.len);
        match r.kind {
            SEND if self.rx_send.is_none() && r.offset == 0 && len == r.total => {
                // A whole message in one slot (the common case): straight into the receive.
                let Some(wr) = ep.recvs.front() else {
                    return Ok(false);
                };
                let fits = r.total <= wr.len();
                let done = if fits {
                    // SAFETY: the payload holds `len` bytes inside the slot (checked by
                    // `peek`); the receive's segments are registered memory, not the ring.
                    unsafe { copy::scatter_raw(&wr.segs, 0, inc.payload, r.len as usize) };
                    wr.completion(DtoStatus::Success, r.len)
                } else {
                    wr.completion(DtoStatus::LocalLength, 0)
                };
                ep.recvs.pop_front();
                out.push(Up::Received(UpcallsRef::of(ep.upcalls), done));
                if !fits {
                    self.ack(SEND_ACK, DtoStatus::RemoteResponder);
                    return Err(Fatal);
                }
                Ok(true)
            }
            SEND => {
                if self.rx_send.is_none() {
                    if r.offset != 0 {
                        return Err(Fatal);
                    }
                    let Some(wr) = self.take_recv(ep, out, r.total)? else {
                        return Ok(false);
                    };
                    self.rx_send = Some((wr, 0, r.total));
                }
                let Some((wr, got, total)) = self.rx_send.as_mut() else {
                    return Err(Fatal);
                };
                if r.offset != *got || len > *total - *got {
                    return Err(Fatal);
                }
                // SAFETY: the payload holds `len` bytes inside the slot (checked by `peek`);
                // the receive's segments are registered memory, not the ring.
                unsafe { copy::scatter_raw(&wr.segs, *got, inc.payload, r.len as usize) };
                *got += len;
                if *got == *total {
                    let total = *total;
                    if let Some((wr, _, _)) = self.rx_send.take() {
                        out.push(Up::Done(
                            ep.upcalls.clone(),
                            wr.completion(DtoStatus::Success, total as u32),
                        ));
                    }
                }
                Ok(true)
            }
            SEND_CMA => {
                if self.rx_send.is_some() {
                    return Err(Fatal);
                }
                let (mut local, mut remote) = std::mem::take(&mut self.cma_lists);
                let got = self.send_cma(inc, ep, out, &mut local, &mut remote);
                self.cma_lists = (local, remote);
                got
            }
            WRITE => {
                if self.rx_write.is_none() {
                    if r.offset != 0 {
                        return Err(Fatal);
                    }
                    let seg = self.check(ep, mem, r, MemPriv::REMOTE_WRITE)?;
                    self.rx_write = Some((seg, 0, r.total));
                }
                let Some((seg, got, total)) = self.rx_write.as_mut() else {
                    return Err(Fatal);
                };
                if r.offset != *got || len > *total - *got {
                    return Err(Fatal);
                }
                // SAFETY: as for SEND; the target segment passed the protection check. The
                // final piece stores the write's last byte last.
                unsafe {
                    let place = if *got + len == *total {
                        copy::scatter_raw_ordered
                    } else {
                        copy::scatter_raw
                    };
                    place(std::slice::from_ref(seg), *got, inc.payload, r.len as usize)
                };
                *got += len;
                if *got == *total {
                    self.rx_write = None;
                }
                Ok(true)
            }
            WRITE_CMA | READ => {
                let need = if r.kind == READ {
                    MemPriv::REMOTE_READ
                } else {
                    MemPriv::REMOTE_WRITE
                };
                let seg = self.check(ep, mem, r, need)?;
                if r.kind == READ && r.c == 0 {
                    self.resps.push_back(Resp::ReadData { seg, pos: 0 });
                    return Ok(true);
                }
                let (mut local, mut remote) = std::mem::take(&mut self.cma_lists);
                let status = self.rdma_cma(inc, &seg, &mut local, &mut remote);
                self.cma_lists = (local, remote);
                let status = status?;
                if status != DtoStatus::Success {
                    self.ack(RDMA_ACK, status);
                    return Err(Fatal);
                }
                Ok(true)
            }
            SEND_ACK | RDMA_ACK => {
                // Only failures are acknowledged by a record (successes by the head).
                let status = DtoStatus::from_raw(r.a).unwrap_or(DtoStatus::BadResponse);
                if status == DtoStatus::Success {
                    return Err(Fatal);
                }
                // What the target carried out before the failure completed first.
                self.retire(ep.upcalls, out);
                let want_send = r.kind == SEND_ACK;
                // A refusal may come back for a message still being transmitted (the target
                // checks the first fragment): its remaining fragments are abandoned.
                let partial = self.sent.is_empty() && self.tx_pos > 0;
                let front = if partial {
                    self.unsent.front().map(|w| w.op.dto_op())
                } else {
                    self.sent.front().map(|s| s.op)
                };
                let ok_front = front
                    .is_some_and(|op| (op == DtoOp::Send) == want_send && op != DtoOp::Receive);
                if !ok_front {
                    return Err(Fatal);
                }
                let done = if partial {
                    self.tx_pos = 0;
                    self.unsent.pop_front().map(|w| w.completion(status, 0))
                } else {
                    self.pop_sent().map(|s| s.completion(status, 0))
                };
                if let Some(c) = done {
                    out.push(Up::Done(ep.upcalls.clone(), c));
                }
                Err(Fatal)
            }
            READ_DATA => {
                // The requests before the read completed first.
                self.retire(ep.upcalls, out);
                let (Some(sent), Some(wr)) = (self.sent.front(), self.held.front()) else {
                    return Err(Fatal);
                };
                if !sent.by_data
                    || !sent.held
                    || !matches!(wr.op, PostOp::RdmaRead(_))
                    || r.total != wr.len()
                    || r.offset > r.total
                    || len > r.total - r.offset
                {
                    return Err(Fatal);
                }
                // SAFETY: as for SEND; the sink is the read's local segments. The final piece
                // stores the read's last byte last.
                unsafe {
                    let place = if r.offset + len == r.total {
                        copy::scatter_raw_ordered
                    } else {
                        copy::scatter_raw
                    };
                    place(&wr.segs, r.offset, inc.payload, r.len as usize)
                };
                if r.offset + len == r.total
                    && let Some(s) = self.pop_sent()
                {
                    out.push(Up::Done(
                        ep.upcalls.clone(),
                        s.completion(DtoStatus::Success, r.total as u32),
                    ));
                }
                Ok(true)
            }
            _ => Err(Fatal),
        }
    }

    /// Target-side protection check; on refusal queues `REMOTE_ACCESS` for the requester.
    fn check(
        &mut self,
        ep: &EpView<'_>,
        mem: &RwLock<MemTable>,
        r: Rec,
        need: MemPriv,
    ) -> Result<Segment, Fatal> {
        let checked = match (ep.pz, r.a) {
            (Some(pz), rkey) => mem
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remote(pz, rkey, r.b, r.total, need),
            _ => Err(DtoStatus::RemoteAccess),
        };
        checked.map_err(|status| {
            self.ack(RDMA_ACK, status);
            Fatal
        })
    }

    /// Takes the receive at the front for a message of `total` bytes (`None`: none posted);
    /// a receive too short completes with `LOCAL_LENGTH`, the sender is told
    /// `REMOTE_RESPONDER`, and the connection breaks.
    fn take_recv(
        &mut self,
        ep: &mut EpView<'_>,
        out: &mut Ups,
        total: u64,
    ) -> Result<Option<WorkRequest>, Fatal> {
        let Some(wr) = ep.recvs.pop_front() else {
            return Ok(None);
        };
        if total > wr.len() {
            out.push(Up::Done(
                ep.upcalls.clone(),
                wr.completion(DtoStatus::LocalLength, 0),
            ));
            self.ack(SEND_ACK, DtoStatus::RemoteResponder);
            return Err(Fatal);
        }
        Ok(Some(wr))
    }

    /// Queues the acknowledgement of a failure (successes are told by the head).
    fn ack(&mut self, kind: u32, status: DtoStatus) {
        debug_assert_ne!(status, DtoStatus::Success);
        self.resps.push_back(Resp::Ack { kind, status });
    }
}

mod cma;
mod iov;
mod push;
mod sent;

use sent::Sent;

#[cfg(test)]
mod tests;
