//! Pushing into the ring: responses first (failures, an RDMA read's data), then the
//! requests posted, each stamped with the head of the other ring (`Rec::ack`).
#![allow(unsafe_code)]

use dat_core::provider::{PostOp, WorkRequest};

use super::iov::write_iovs;
use super::{DataPath, READ, READ_DATA, Resp, SEND, SEND_CMA, Sent, WRITE, WRITE_CMA};
use crate::copy;
use crate::ring::{Producer, Rec};

impl DataPath {
    /// Pushes queued responses, then queued requests, as far as the ring allows, without
    /// waking the consumer (the caller does). Returns whether anything was pushed.
    pub(super) fn push_all(&mut self) -> bool {
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
                        a: *status as u32,
                        ack: self.rx.head(),
                        ..Rec::default()
                    };
                    if !self.tx.push(rec, |_, _| {}) {
                        return false;
                    }
                }
                Resp::ReadData { seg, pos } => loop {
                    let total = seg.len as u64;
                    let at = *pos;
                    let n = (total - at).min(self.tx.payload_cap() as u64);
                    let rec = Rec {
                        kind: READ_DATA,
                        len: n as u32,
                        total,
                        offset: at,
                        ack: self.rx.head(),
                        ..Rec::default()
                    };
                    let segs = std::slice::from_ref(&*seg);
                    // SAFETY: `dst` has `n` writable bytes in the ring slot.
                    let fill = |dst, n| unsafe {
                        copy::gather_raw(segs, at, dst, n);
                    };
                    if !self.tx.push(rec, fill) {
                        return false;
                    }
                    *any = true;
                    *pos = at + n;
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
        let cma_above = self.cma_above();
        while let Some(wr) = self.unsent.front() {
            let Some(p) = push_req(
                &mut self.tx,
                self.rx.head(),
                cma_above,
                &mut self.tx_pos,
                wr,
                any,
            ) else {
                return false;
            };
            if let Some(wr) = self.unsent.pop_front() {
                self.sent_out(wr, p);
            }
        }
        true
    }

    /// Pushes a request that nothing queued precedes; queues what does not fit.
    #[inline]
    pub(super) fn push_now(&mut self, wr: WorkRequest, any: &mut bool) {
        let cma_above = self.cma_above();
        match push_req(
            &mut self.tx,
            self.rx.head(),
            cma_above,
            &mut self.tx_pos,
            &wr,
            any,
        ) {
            // Held or dropped here: the work request moves only if it is kept.
            Some(p) if self.note_sent(&wr, &p) => self.held.push_back(wr),
            Some(_) => {}
            None => self.unsent.push_back(wr),
        }
    }

    /// The size above which a request carries addresses for the peer's cross-memory attach
    /// (`u64::MAX`: never).
    #[inline]
    fn cma_above(&self) -> u64 {
        if self.cma_out {
            self.inline_max
        } else {
            u64::MAX
        }
    }

    /// Records a request wholly pushed: a compact entry for its completion, and the work
    /// request itself only if the ring names its memory.
    fn sent_out(&mut self, wr: WorkRequest, p: Pushed) {
        if self.note_sent(&wr, &p) {
            self.held.push_back(wr);
        }
    }

    /// The compact entry of a request wholly pushed; returns whether its work request must
    /// be held (the ring names its memory).
    #[inline]
    pub(super) fn note_sent(&mut self, wr: &WorkRequest, p: &Pushed) -> bool {
        let held = matches!(p.kind, SEND_CMA | WRITE_CMA | READ);
        let s = Sent {
            end: self.tx.tail(),
            cookie: wr.cookie,
            len: p.total as u32,
            flags: wr.flags,
            op: wr.op.dto_op(),
            by_data: p.by_data,
            held,
        };
        if !s.quiet() {
            self.wanted += 1;
        }
        self.sent.push_back(s);
        self.tx_pos = 0;
        held
    }
}

/// How a request went into the ring.
pub(super) struct Pushed {
    kind: u32,
    total: u64,
    by_data: bool,
}

impl Pushed {
    /// A send of `total` bytes in one record ([`push_small`]).
    pub(super) fn small_send(total: u64) -> Pushed {
        Pushed {
            kind: SEND,
            total,
            by_data: false,
        }
    }
}

/// Pushes the records of `wr` from `*tx_pos` on, each stamped with `ack`; returns how, once
/// all are in the ring, or `None` if it filled up (`*tx_pos` then says how far it got).
/// A request larger than `cma_above` bytes carries addresses for the peer's cross-memory
/// attach instead of its bytes.
fn push_req(
    tx: &mut Producer,
    ack: u64,
    cma_above: u64,
    tx_pos: &mut u64,
    wr: &WorkRequest,
    any: &mut bool,
) -> Option<Pushed> {
    let cap = tx.payload_cap();
    let total = wr.len();
    if wr.op == PostOp::Send && total <= cap as u64 && *tx_pos == 0 {
        // A message that fits one slot (the common case): one record, bytes inline.
        if !push_small(tx, ack, wr, total) {
            return None;
        }
        *any = true;
        return Some(Pushed::small_send(total));
    }
    push_req_rest(tx, wr, any, (ack, cma_above, tx_pos))
}

/// Pushes a send of `total` bytes that fits one slot as one record stamped with `ack`, its
/// bytes inline; false if the ring is full (nothing pushed).
#[inline(always)]
pub(super) fn push_small(tx: &mut Producer, ack: u64, wr: &WorkRequest, total: u64) -> bool {
    let rec = Rec {
        kind: SEND,
        len: total as u32,
        total,
        ack,
        ..Rec::default()
    };
    let segs = &wr.segs;
    // SAFETY: `dst` has `n` writable bytes in the ring slot.
    let fill = |dst, n| unsafe {
        copy::gather_raw(segs, 0, dst, n);
    };
    tx.push(rec, fill)
}

/// [`push_req`] of anything but a message that fits one slot: out of line, so that the
/// common case stays small where it is inlined.
/// `(ack, cma_above, tx_pos)` as there.
#[inline(never)]
fn push_req_rest(
    tx: &mut Producer,
    wr: &WorkRequest,
    any: &mut bool,
    (ack, cma_above, tx_pos): (u64, u64, &mut u64),
) -> Option<Pushed> {
    let cap = tx.payload_cap();
    let total = wr.len();
    // Addresses for the peer's cross-memory attach, when it may, the request is larger
    // than what travels inline, and they fit a slot (else the bytes travel through the
    // ring).
    let iovs = match wr.op {
        PostOp::Send if total <= cap as u64 => None,
        PostOp::Recv => None,
        _ if total > cma_above => Some(copy::iov_iter(&wr.segs).count()).filter(|n| n * 16 <= cap),
        _ => None,
    };
    let (kind, a, b) = match (wr.op, &iovs) {
        (PostOp::Send, None) => (SEND, 0, 0),
        (PostOp::Send, Some(_)) => (SEND_CMA, 0, 0),
        (PostOp::RdmaWrite(r), Some(_)) => (WRITE_CMA, r.rmr_context, r.virtual_address),
        (PostOp::RdmaWrite(r), None) => (WRITE, r.rmr_context, r.virtual_address),
        (PostOp::RdmaRead(r), _) => (READ, r.rmr_context, r.virtual_address),
        // Never queued here (receives go to the endpoint): complete at once.
        (PostOp::Recv, _) => (0, 0, 0),
    };
    // A read without addresses (copy mode, or nothing to read) is answered with data.
    let by_data = kind == READ && iovs.is_none_or(|n| n == 0);
    if kind == 0 {
        // Nothing to push.
    } else if matches!(kind, WRITE_CMA | READ | SEND_CMA) {
        // The addresses (none for a read in copy mode: the data comes back through
        // the ring).
        let n_iovs = iovs.unwrap_or(0);
        let rec = Rec {
            kind,
            len: (n_iovs * 16) as u32,
            total,
            a,
            b,
            c: n_iovs as u32,
            ack,
            ..Rec::default()
        };
        let segs = &wr.segs;
        let list = copy::iov_iter(segs).take(n_iovs);
        if !tx.push(rec, |dst, n| write_iovs(list, dst, n)) {
            return None;
        }
    } else {
        loop {
            let at = *tx_pos;
            let n = (total - at).min(cap as u64);
            let rec = Rec {
                kind,
                len: n as u32,
                total,
                offset: at,
                a,
                b,
                ack,
                ..Rec::default()
            };
            let segs = &wr.segs;
            // SAFETY: `dst` has `n` writable bytes in the ring slot.
            let fill = |dst, n| unsafe {
                copy::gather_raw(segs, at, dst, n);
            };
            if !tx.push(rec, fill) {
                return None;
            }
            *any = true;
            *tx_pos = at + n;
            if *tx_pos == total {
                break;
            }
        }
    }
    *any = true;
    Some(Pushed {
        kind,
        total,
        by_data,
    })
}
