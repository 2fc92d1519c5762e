//! Framing what goes out: read responses, our requests in posting order, and the
//! acknowledgement of the peer's requests (piggy-backed, or bare when due).

use std::time::Instant;

use dat_core::mem::{Segment, gather_at};
use dat_core::provider::PostOp;
use dat_core::types::CompletionFlags;

use super::txq::TxQueue;
use super::{ACK_DELAY, ACK_EVERY, Engine, TX_HIGH_WATER, ZERO_COPY_MIN};
use crate::wire::{DataHeader, FIRST, Frame, LAST, MAX_CHUNK, SOLICITED};

/// Queues `n` bytes of the concatenation of `segs` from logical position `pos` by reference.
/// Segments shorter than announced (impossible for resolved posts) are padded with zeros so
/// the frame keeps its announced length.
fn push_segments(txq: &mut TxQueue, segs: &[Segment], mut pos: u64, n: usize) {
    let mut left = n;
    for s in segs {
        if left == 0 {
            break;
        }
        let len = s.len_u64();
        if pos >= len {
            pos -= len;
            continue;
        }
        let off = usize::try_from(pos).unwrap_or(usize::MAX);
        let take = (s.len - off).min(left);
        txq.push_mem(s, off, take);
        left -= take;
        pos = 0;
    }
    if left > 0 {
        tracing::error!(left, "segments shorter than the message");
        let at = txq.buf.len();
        txq.buf.resize(at + left, 0);
    }
}

/// [`gather_at`] for a small payload, the usual single segment copied from directly.
fn gather_small(segs: &[Segment], pos: u64, dst: &mut [u8]) {
    match (segs, usize::try_from(pos)) {
        ([seg], Ok(off)) if off.checked_add(dst.len()).is_some_and(|e| e <= seg.len) => {
            if seg.copy_to(off, dst).is_err() {
                tracing::error!("send source out of range");
            }
        }
        _ => {
            gather_at(segs, pos, dst);
        }
    }
}

/// Flags of the piece `pos..pos+n` of a message of `total` bytes.
fn piece_flags(pos: u32, n: u32, total: u32) -> u8 {
    let mut f = 0;
    if pos == 0 {
        f |= FIRST;
    }
    if pos.saturating_add(n) >= total {
        f |= LAST;
    }
    f
}

impl Engine {
    /// Queues frames up to the high-water mark: read responses first, then our requests in
    /// order, then a bare acknowledgement if nothing carried it.
    pub(super) fn fill_tx(&mut self) {
        while self.txq.len() < TX_HIGH_WATER {
            if let Some(r) = self.responses.front_mut() {
                let n = (r.total - r.pos).min(MAX_CHUNK as u32);
                let flags = piece_flags(r.pos, n, r.total);
                DataHeader::ReadResp {
                    msn: r.msn,
                    total: r.total,
                }
                .emit(flags, n as usize, self.processed, &mut self.txq.buf);
                let at = usize::try_from(r.pos).unwrap_or(usize::MAX);
                match &r.seg {
                    Some(seg) if self.zero_copy && n as usize >= ZERO_COPY_MIN => {
                        self.txq.push_mem(seg, at, n as usize);
                    }
                    seg => {
                        let start = self.txq.buf.len();
                        self.txq.buf.resize(start + n as usize, 0);
                        if let (Some(seg), Some(dst)) = (seg, self.txq.buf.get_mut(start..))
                            && seg.copy_to(at, dst).is_err()
                        {
                            tracing::error!("read response source out of range");
                        }
                    }
                }
                r.pos += n;
                if r.pos >= r.total {
                    self.responses.pop_front();
                }
                self.acked_now();
                continue;
            }
            let Some(p) = self.outstanding.get(self.tx_idx) else {
                break;
            };
            let (msn, total, off) = (p.msn, p.len, self.tx_off);
            let n = (total - off).min(MAX_CHUNK as u32);
            let flags = piece_flags(off, n, total);
            let header = match p.wr.op {
                PostOp::Send => DataHeader::Send { msn, total },
                PostOp::RdmaWrite(r) => DataHeader::RdmaWrite {
                    msn,
                    total,
                    rkey: r.rmr_context,
                    addr: r.virtual_address,
                },
                PostOp::RdmaRead(r) => {
                    Frame::ReadReq {
                        msn,
                        len: total,
                        rkey: r.rmr_context,
                        addr: r.virtual_address,
                    }
                    .emit(self.processed, &mut self.txq.buf);
                    self.sent_request(msn);
                    continue;
                }
                PostOp::Recv => {
                    // Never queued here; drop defensively.
                    self.tx_idx += 1;
                    continue;
                }
            };
            let flags = if matches!(header, DataHeader::Send { .. })
                && p.wr.flags.contains(CompletionFlags::SOLICITED_WAIT)
            {
                flags | SOLICITED
            } else {
                flags
            };
            header.emit(flags, n as usize, self.processed, &mut self.txq.buf);
            if self.zero_copy && n as usize >= ZERO_COPY_MIN {
                push_segments(&mut self.txq, &p.wr.segs, u64::from(off), n as usize);
            } else {
                let start = self.txq.buf.len();
                self.txq.buf.resize(start + n as usize, 0);
                if let Some(dst) = self.txq.buf.get_mut(start..) {
                    gather_small(&p.wr.segs, u64::from(off), dst);
                }
            }
            if off + n >= total {
                self.sent_request(msn);
            } else {
                self.tx_off = off + n;
                self.acked_now();
            }
        }
        if self.bare_ack_due() {
            Frame::Ack.emit(self.processed, &mut self.txq.buf);
            self.acked_now();
        }
    }

    /// The peer's request `msn` has been executed: it will be acknowledged.
    pub(super) fn executed(&mut self, msn: u32, now: Instant) {
        self.processed = msn;
        if self.ack_due.is_none() {
            self.ack_due = Some(now + ACK_DELAY);
        }
    }

    /// Every frame we queue carries the acknowledgement.
    fn acked_now(&mut self) {
        self.ack_sent = self.processed;
        self.ack_due = None;
    }

    /// True if a bare `Ack` must go out now: always in immediate mode; in delayed mode once
    /// [`ACK_EVERY`] requests wait for it or the oldest has waited [`ACK_DELAY`].
    pub(super) fn bare_ack_due(&self) -> bool {
        if self.processed == self.ack_sent {
            return false;
        }
        match self.ack_clock {
            None => true,
            Some(now) => {
                self.processed.wrapping_sub(self.ack_sent) >= ACK_EVERY
                    || self.ack_due.is_some_and(|d| now >= d)
            }
        }
    }

    fn sent_request(&mut self, msn: u32) {
        self.tx_idx += 1;
        self.tx_off = 0;
        self.last_sent = msn;
        self.acked_now();
    }
}
