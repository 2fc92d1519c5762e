//! The data path of one connection: requests and responses through the two rings of its
//! segment.
//!
//! # Records
//! | kind | from | fields | payload |
//! |------|------|--------|---------|
//! | `SEND` | requester | `total`, `offset` | message bytes |
//! | `SEND_CMA` | requester | `total`, `c` iov count | requester's iovs (messages larger than a slot) |
//! | `WRITE` | requester | `a` rkey, `b` address, `total`, `offset` | bytes (copy mode) |
//! | `WRITE_CMA` | requester | `a`, `b`, `total`, `c` iov count | requester's iovs |
//! | `READ` | requester | `a`, `b`, `total`, `c` iov count (0: copy mode) | iovs |
//! | `SEND_ACK` | target | `a` status | |
//! | `RDMA_ACK` | target | `a` status | |
//! | `READ_DATA` | target | `total`, `offset` | bytes |
//!
//! Targets process records strictly in order, so responses come back in the order the
//! requester posted: every response completes the oldest outstanding request. A send that
//! finds no receive posted stays in the ring (back-pressure, nothing dropped) and holds back
//! what follows it, as on a reliable-connected queue pair.
//!
//! Every incoming RDMA is checked with [`MemTable::remote`] at the target before a byte moves.
//! With cross-memory attach the *target* performs the single copy (`process_vm_readv` for a
//! write, `process_vm_writev` for a read) between its checked region and the requester's
//! local segments; otherwise the bytes travel through the ring.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{Ordering, fence};
use std::sync::{Arc, RwLock};

use dat_core::mem::{MemTable, SegList, Segment};
use dat_core::provider::{
    CmFact, Completion, ConnRequest, EpUpcalls, PostOp, SpUpcalls, WorkRequest,
};
use dat_core::types::{CompletionFlags, DtoStatus, MemPriv, PzId};

use crate::copy;
use crate::ring::{Consumer, Incoming, Producer, Rec};
use crate::sys::{self, RemoteIov};

use iov::{STORES_IN_ORDER, advance, read_iovs, split_last_byte, truncate, write_iovs};

const SEND: u32 = 1;
const WRITE: u32 = 2;
const WRITE_CMA: u32 = 3;
const READ: u32 = 4;
const SEND_ACK: u32 = 5;
const RDMA_ACK: u32 = 6;
const READ_DATA: u32 = 7;
const SEND_CMA: u32 = 8;

/// Upcalls collected under the lock (inline: no allocation per message).
pub type Ups = smallvec::SmallVec<[Up; 8]>;

/// An upcall to make once the provider's lock is released.
pub enum Up {
    /// A DTO completion.
    Done(Arc<dyn EpUpcalls>, Completion),
    /// A connection fact.
    Cm(Arc<dyn EpUpcalls>, CmFact),
    /// A connection request.
    Req(Arc<dyn SpUpcalls>, ConnRequest),
}

impl Up {
    /// Makes the upcall.
    pub fn run(self) {
        match self {
            Up::Done(u, c) => u.completion(c),
            Up::Cm(u, f) => u.cm(f),
            Up::Req(u, r) => u.connection_request(r),
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
    reqs: VecDeque<WorkRequest>,
    sent: usize,
    tx_pos: u64,
    resps: VecDeque<Resp>,
    rx_send: Option<(WorkRequest, u64, u64)>,
    rx_write: Option<(Segment, u64, u64)>,
    /// The oldest incoming record is a send waiting for a receive.
    blocked: bool,
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
            reqs: VecDeque::new(),
            sent: 0,
            tx_pos: 0,
            resps: VecDeque::new(),
            rx_send: None,
            rx_write: None,
            blocked: false,
        }
    }

    /// Queues a request (send or RDMA) and pushes what fits.
    pub fn post(&mut self, wr: WorkRequest) {
        self.reqs.push_back(wr);
        self.flush_tx();
    }

    /// True if a pump could move something: a record waits (other than a send held back for
    /// want of a receive) or output is queued.
    pub fn has_work(&mut self) -> bool {
        (!self.blocked && matches!(self.rx.peek(), Ok(Some(_)) | Err(_)))
            || !self.resps.is_empty()
            || self.sent < self.reqs.len()
    }

    /// True if the oldest incoming record is a send that waits for a receive (only a posted
    /// receive can release it).
    pub fn held_back(&self) -> bool {
        self.blocked
    }

    /// Requests posted and not yet completed.
    pub fn outstanding(&self) -> usize {
        self.reqs.len()
    }

    /// Processes incoming records, then pushes queued output. Returns whether anything moved,
    /// or [`Fatal`] when the connection must break (responses already queued are pushed).
    pub fn pump(
        &mut self,
        ep: &mut EpView<'_>,
        mem: &RwLock<MemTable>,
        out: &mut Ups,
    ) -> Result<bool, Fatal> {
        let r = self.take_records(ep, mem, out, true);
        // One fence covers both halves of the wake-up protocol: the slots handed back (a
        // producer starved for room) and the records published (a consumer asleep).
        let released = self.rx.publish_head();
        let pushed = self.push_all();
        if released || pushed {
            fence(Ordering::SeqCst);
            let starved = released && self.rx.producer_starved();
            if (pushed && self.tx.consumer_sleeping()) | starved {
                sys::signal(self.peer_efd.as_fd());
            }
        }
        r.map(|got| got || pushed)
    }

    /// Takes in what a departed peer had published: its messages and the responses to our
    /// requests. Its own RDMA requests are not served: it has flushed them, may have released
    /// their memory, and its process id may already name another process.
    pub fn drain(&mut self, ep: &mut EpView<'_>, mem: &RwLock<MemTable>, out: &mut Ups) {
        let _ = self.receive(ep, mem, out, false);
    }

    /// Prepares to sleep: returns true if work arrived meanwhile (a send held back for want
    /// of a receive is not work: only a posted receive releases it).
    pub fn arm(&mut self) -> bool {
        self.rx.arm() && !self.blocked
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
        let mut keep = Vec::new();
        for (i, mut wr) in self.reqs.drain(..).enumerate() {
            if let Some(u) = upcalls {
                out.push(Up::Done(u.clone(), wr.completion(DtoStatus::Flushed, 0)));
            }
            if self.cma_out && i < self.sent && wr.op != PostOp::Recv {
                keep.push(std::mem::take(&mut wr.segs));
            }
        }
        if let (Some((wr, _, _)), Some(u)) = (self.rx_send.take(), upcalls) {
            out.push(Up::Done(u.clone(), wr.completion(DtoStatus::Flushed, 0)));
        }
        self.sent = 0;
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
                out.push(Up::Done(ep.upcalls.clone(), done));
                if !fits {
                    self.ack(SEND_ACK, DtoStatus::RemoteResponder);
                    return Err(Fatal);
                }
                self.ack(SEND_ACK, DtoStatus::Success);
                Ok(true)
            }
            SEND => {
                if self.rx_send.is_none() {
                    if r.offset != 0 {
                        return Err(Fatal);
                    }
                    let Some(wr) = ep.recvs.pop_front() else {
                        return Ok(false);
                    };
                    if r.total > wr.len() {
                        out.push(Up::Done(
                            ep.upcalls.clone(),
                            wr.completion(DtoStatus::LocalLength, 0),
                        ));
                        self.ack(SEND_ACK, DtoStatus::RemoteResponder);
                        return Err(Fatal);
                    }
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
                    self.ack(SEND_ACK, DtoStatus::Success);
                }
                Ok(true)
            }
            SEND_CMA => {
                if self.rx_send.is_some() {
                    return Err(Fatal);
                }
                let iovs = read_iovs(inc)?;
                if !self.cma_in || iovs.iter().map(|i| i.len).sum::<u64>() != r.total {
                    return Err(Fatal);
                }
                let Some(wr) = ep.recvs.pop_front() else {
                    return Ok(false);
                };
                if r.total > wr.len() {
                    out.push(Up::Done(
                        ep.upcalls.clone(),
                        wr.completion(DtoStatus::LocalLength, 0),
                    ));
                    self.ack(SEND_ACK, DtoStatus::RemoteResponder);
                    return Err(Fatal);
                }
                let mut local = copy::iovs(&wr.segs);
                truncate(&mut local, r.total);
                let status = match self.cma(local, &iovs, r.total, false) {
                    Ok(status) => status,
                    Err(PeerGone) => {
                        // The sender died before we could copy: the message never arrived
                        // and its receive stays posted (the breakage flushes it in order).
                        ep.recvs.push_front(wr);
                        return Err(Fatal);
                    }
                };
                let n = if status == DtoStatus::Success {
                    r.total as u32
                } else {
                    0
                };
                out.push(Up::Done(ep.upcalls.clone(), wr.completion(status, n)));
                self.ack(SEND_ACK, status);
                if status != DtoStatus::Success {
                    return Err(Fatal);
                }
                Ok(true)
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
                    self.ack(RDMA_ACK, DtoStatus::Success);
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
                let iovs = read_iovs(inc)?;
                if !self.cma_in || iovs.iter().map(|i| i.len).sum::<u64>() != r.total {
                    return Err(Fatal);
                }
                let Some((p, len)) = copy::target(&seg) else {
                    return Err(Fatal);
                };
                let local = vec![RemoteIov {
                    addr: p as u64,
                    len: len as u64,
                }];
                let status = self
                    .cma(local, &iovs, r.total, r.kind == READ)
                    .unwrap_or(DtoStatus::Transport);
                self.ack(RDMA_ACK, status);
                if status != DtoStatus::Success {
                    return Err(Fatal);
                }
                Ok(true)
            }
            SEND_ACK | RDMA_ACK => {
                let status = DtoStatus::from_raw(r.a as u32).unwrap_or(DtoStatus::BadResponse);
                let want_send = r.kind == SEND_ACK;
                // A refusal may come back for a message still being transmitted (the target
                // checks the first fragment): its remaining fragments are abandoned.
                let partial = self.sent == 0 && self.tx_pos > 0 && status != DtoStatus::Success;
                let ok_front = (self.sent > 0 || partial)
                    && self.reqs.front().is_some_and(|w| {
                        (w.op == PostOp::Send) == want_send && !matches!(w.op, PostOp::Recv)
                    });
                if !ok_front {
                    return Err(Fatal);
                }
                let Some(wr) = self.reqs.pop_front() else {
                    return Err(Fatal);
                };
                if partial {
                    self.tx_pos = 0;
                } else {
                    self.sent -= 1;
                }
                if status != DtoStatus::Success {
                    out.push(Up::Done(ep.upcalls.clone(), wr.completion(status, 0)));
                    return Err(Fatal);
                }
                // A successful completion the consumer suppressed is dropped by the core
                // anyway: no upcall for it (the common case of a streaming sender).
                if !wr.flags.contains(CompletionFlags::SUPPRESS) {
                    let n = wr.len() as u32;
                    out.push(Up::Done(ep.upcalls.clone(), wr.completion(status, n)));
                }
                Ok(true)
            }
            READ_DATA => {
                let Some(wr) = self.reqs.front() else {
                    return Err(Fatal);
                };
                if self.sent == 0
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
                    && let Some(wr) = self.reqs.pop_front()
                {
                    self.sent -= 1;
                    out.push(Up::Done(
                        ep.upcalls.clone(),
                        wr.completion(DtoStatus::Success, r.total as u32),
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
        let checked = match (ep.pz, u32::try_from(r.a)) {
            (Some(pz), Ok(rkey)) => mem
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

    /// The single copy of a cross-memory transfer, done by the target: `total` bytes between
    /// `local` (ranges of this process: a checked target region or a posted receive) and the
    /// peer's `remote` ranges, into the peer's memory when `into_peer`.
    /// [`PeerGone`] when the peer process has exited (`ESRCH`): its connection is about to
    /// report the hang-up.
    fn cma(
        &self,
        mut local: Vec<RemoteIov>,
        remote: &[RemoteIov],
        total: u64,
        into_peer: bool,
    ) -> Result<DtoStatus, PeerGone> {
        let mut rest = remote.to_vec();
        let mut done = 0u64;
        let last_apart = split_last_byte(&mut local) && !STORES_IN_ORDER;
        while done < total {
            // The last byte lands last (see `split_last_byte`); on a weakly ordered CPU it
            // is copied by a call of its own, after a fence.
            let upto = local.len() - usize::from(last_apart && done + 1 < total);
            if last_apart && done + 1 == total {
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            }
            // SAFETY: every local range lies in registered memory that this request keeps
            // alive (the checked target segment, or the receive's segments) and that no Rust
            // reference borrows; the kernel checks the peer's ranges.
            let r = unsafe {
                if into_peer {
                    sys::cma_writev(self.peer_pid, &local[..upto], &rest)
                } else {
                    sys::cma_readv(self.peer_pid, &local[..upto], &rest)
                }
            };
            match r {
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Err(PeerGone),
                Ok(0) | Err(_) => {
                    tracing::warn!(pid = self.peer_pid, "shm: cross-memory attach failed");
                    return Ok(DtoStatus::Transport);
                }
                Ok(n) => {
                    done += n as u64;
                    advance(&mut local, n as u64);
                    advance(&mut rest, n as u64);
                }
            }
        }
        Ok(DtoStatus::Success)
    }

    fn ack(&mut self, kind: u32, status: DtoStatus) {
        self.resps.push_back(Resp::Ack { kind, status });
    }

    /// Pushes queued responses, then queued requests, as far as the ring allows. Returns
    /// whether anything was pushed.
    pub fn flush_tx(&mut self) -> bool {
        let any = self.push_all();
        if any && self.tx.consumer_needs_wake() {
            sys::signal(self.peer_efd.as_fd());
        }
        any
    }

    /// Pushes what fits (see [`DataPath::flush_tx`]) without waking the consumer. Returns
    /// whether anything was pushed.
    fn push_all(&mut self) -> bool {
        let mut any = false;
        loop {
            let blocked = !self.push_resps(&mut any) || !self.push_reqs(&mut any);
            if !blocked || !self.tx.set_starved() {
                break;
            }
        }
        any
    }

    /// Returns false if the ring filled up.
    fn push_resps(&mut self, any: &mut bool) -> bool {
        while let Some(resp) = self.resps.front_mut() {
            match resp {
                Resp::Ack { kind, status } => {
                    let rec = Rec {
                        kind: *kind,
                        a: *status as u64,
                        ..Rec::default()
                    };
                    if !self.tx.push(rec, |_, _| 0) {
                        return false;
                    }
                }
                Resp::ReadData { seg, pos } => loop {
                    let total = seg.len as u64;
                    let rec = Rec {
                        kind: READ_DATA,
                        total,
                        offset: *pos,
                        ..Rec::default()
                    };
                    let at = *pos;
                    let segs = std::slice::from_ref(&*seg);
                    let pushed = self.tx.push(rec, |dst, cap| {
                        let n = (total - at).min(cap as u64) as usize;
                        // SAFETY: `dst` has `cap >= n` writable bytes in the ring slot.
                        unsafe { copy::gather_raw(segs, at, dst, n) };
                        n
                    });
                    if !pushed {
                        return false;
                    }
                    *any = true;
                    *pos = (at + self.tx.payload_cap() as u64).min(total);
                    if *pos == total {
                        break;
                    }
                },
            }
            *any = true;
            self.resps.pop_front();
        }
        true
    }

    fn push_reqs(&mut self, any: &mut bool) -> bool {
        let cap = self.tx.payload_cap();
        while let Some(wr) = self.reqs.get(self.sent) {
            let total = wr.len();
            // Addresses for the peer's cross-memory attach, when it may and they fit a slot
            // (else the bytes travel through the ring).
            let iovs = match wr.op {
                PostOp::Send if total <= cap as u64 => None,
                PostOp::Recv => None,
                _ if self.cma_out => Some(copy::iovs(&wr.segs)).filter(|v| v.len() * 16 <= cap),
                _ => None,
            };
            let (kind, a, b) = match (wr.op, &iovs) {
                (PostOp::Send, None) => (SEND, 0, 0),
                (PostOp::Send, Some(_)) => (SEND_CMA, 0, 0),
                (PostOp::RdmaWrite(r), Some(_)) => (WRITE_CMA, r.rmr_context, r.virtual_address),
                (PostOp::RdmaWrite(r), None) => (WRITE, r.rmr_context, r.virtual_address),
                (PostOp::RdmaRead(r), _) => (READ, r.rmr_context, r.virtual_address),
                (PostOp::Recv, _) => {
                    self.sent += 1;
                    continue;
                }
            };
            let a = u64::from(a);
            if kind == WRITE_CMA || kind == READ || kind == SEND_CMA {
                let iovs = iovs.unwrap_or_default();
                let rec = Rec {
                    kind,
                    total,
                    a,
                    b,
                    c: iovs.len() as u64,
                    ..Rec::default()
                };
                let pushed = self.tx.push(rec, |dst, cap| write_iovs(&iovs, dst, cap));
                if !pushed {
                    return false;
                }
            } else {
                loop {
                    let at = self.tx_pos;
                    let rec = Rec {
                        kind,
                        total,
                        offset: at,
                        a,
                        b,
                        ..Rec::default()
                    };
                    let segs = &wr.segs;
                    let pushed = self.tx.push(rec, |dst, cap| {
                        let n = (total - at).min(cap as u64) as usize;
                        // SAFETY: `dst` has `cap >= n` writable bytes in the ring slot.
                        unsafe { copy::gather_raw(segs, at, dst, n) };
                        n
                    });
                    if !pushed {
                        return false;
                    }
                    *any = true;
                    self.tx_pos = (at + cap as u64).min(total);
                    if self.tx_pos == total {
                        break;
                    }
                }
            }
            *any = true;
            self.sent += 1;
            self.tx_pos = 0;
        }
        true
    }
}

mod iov;

#[cfg(test)]
mod tests;
