//! The outcome of our own requests: the peer's cumulative acknowledgement, RDMA read
//! responses, a refusal (`Nak`), and completions reported in posting order (suppressed
//! successes counted, see [`Engine::report_quiet`]).

use dat_core::mem::{Segment, scatter_at, scatter_at_ordered};
use dat_core::provider::{CmFact, PostOp};
use dat_core::types::{CompletionFlags, DtoStatus};

use super::data::bad;
use super::{Engine, Event, Flow, Pending, Streaming, seq_le};
use crate::wire::{FIRST, LAST, WireError};

/// Places bytes of an RDMA read response at message position `at` of the read's local
/// segments; the piece that ends the response stores its last byte last.
pub(super) fn place_read(segs: &[Segment], at: u64, bytes: &[u8], total: u64) {
    if at.saturating_add(bytes.len() as u64) >= total {
        scatter_at_ordered(segs, at, bytes);
    } else {
        scatter_at(segs, at, bytes);
    }
}

impl Engine {
    /// Applies the peer's cumulative acknowledgement.
    pub(super) fn on_ack(&mut self, ack: u32) -> Result<(), WireError> {
        if ack == self.peer_acked {
            return Ok(());
        }
        if !seq_le(self.peer_acked, ack) || !seq_le(ack, self.last_sent) {
            return Err(bad("acknowledgement of a request never sent"));
        }
        self.peer_acked = ack;
        self.complete_front();
        Ok(())
    }

    /// Reports, in posting order, every request at the front that has finished.
    fn complete_front(&mut self) {
        while let Some(p) = self.outstanding.front() {
            let finished = if matches!(p.wr.op, PostOp::RdmaRead(_)) {
                p.done
            } else {
                self.tx_idx > 0 && seq_le(p.msn, self.peer_acked)
            };
            if !finished {
                break;
            }
            if let Some(p) = self.outstanding.pop_front() {
                self.tx_idx = self.tx_idx.saturating_sub(1);
                // A successful completion the consumer suppressed is never delivered: it is
                // only counted, and the count reported before the next completion of a
                // request or at the end of the connection (errors are always reported).
                // Reporting each run cost a ping-pong whose sends are suppressed an event
                // and an upcall per message.
                if p.wr.flags.contains(CompletionFlags::SUPPRESS) {
                    self.quiet_done += 1;
                } else {
                    self.report_quiet();
                    self.events.push_back(Event::Completion(
                        p.wr.completion(DtoStatus::Success, p.len),
                    ));
                }
            }
        }
    }

    /// Queues the count of suppressed requests that succeeded since the last report as
    /// [`Event::Retired`], if any. Called before any later completion of a request is queued
    /// and when the connection ends, so that the consumer never sees a completion of a
    /// request posted after them while they still count as outstanding.
    pub(super) fn report_quiet(&mut self) {
        while self.quiet_done > 0 {
            let n = u32::try_from(self.quiet_done).unwrap_or(u32::MAX);
            self.events.push_back(Event::Retired(n));
            self.quiet_done -= u64::from(n);
        }
    }

    pub(super) fn on_read_resp(
        &mut self,
        msn: u32,
        total: u32,
        flags: u8,
        payload: &[u8],
        n: u32,
    ) -> Result<Flow, WireError> {
        let front = self.outstanding.front().map(|p| p.msn).unwrap_or(msn);
        let idx = usize::try_from(msn.wrapping_sub(front)).map_err(|_| bad("msn"))?;
        if idx >= self.tx_idx {
            return Err(bad("response to a read never sent"));
        }
        let Some(p) = self.outstanding.get_mut(idx) else {
            return Err(bad("response to an unknown read"));
        };
        if p.msn != msn || !matches!(p.wr.op, PostOp::RdmaRead(_)) || p.done || p.len != total {
            return Err(bad("response does not match the read"));
        }
        if (flags & FIRST != 0) != (p.read_pos == 0) {
            return Err(bad("first piece flag"));
        }
        let end = p.read_pos.checked_add(n).filter(|&e| e <= total);
        let Some(end) = end else {
            return Err(bad("response exceeds the read"));
        };
        if (end == total) != (flags & LAST != 0) {
            return Err(bad("last piece flag"));
        }
        let start = p.read_pos;
        place_read(&p.wr.segs, u64::from(start), payload, u64::from(total));
        p.read_pos = end;
        if self.stream_rest(
            Streaming::ReadResp,
            msn,
            total,
            flags,
            start,
            payload.len(),
            n,
        ) {
            return Ok(Flow::Next);
        }
        self.finish_read(msn);
        Ok(Flow::Next)
    }

    pub(super) fn finish_read(&mut self, msn: u32) {
        let Some(p) = self.outstanding.iter_mut().find(|p| p.msn == msn) else {
            return;
        };
        if p.read_pos == p.len {
            p.done = true;
            self.complete_front();
        }
    }

    pub(super) fn on_nak(&mut self, msn: u32, status: u32) -> Result<(), WireError> {
        let status = DtoStatus::from_raw(status).ok_or(bad("nak status"))?;
        let front = self.outstanding.front().map(|p| p.msn).unwrap_or(msn);
        let idx = usize::try_from(msn.wrapping_sub(front)).map_err(|_| bad("msn"))?;
        let started = self.tx_idx + usize::from(self.tx_off > 0);
        if idx >= started {
            return Err(bad("nak of a request never sent"));
        }
        // Everything before the failed request was executed by the target, in order.
        self.report_quiet();
        for p in self.outstanding.drain(..idx).collect::<Vec<Pending>>() {
            let status = if matches!(p.wr.op, PostOp::RdmaRead(_)) && !p.done {
                DtoStatus::Flushed
            } else {
                DtoStatus::Success
            };
            let len = if status == DtoStatus::Success {
                p.len
            } else {
                0
            };
            self.events
                .push_back(Event::Completion(p.wr.completion(status, len)));
        }
        if let Some(p) = self.outstanding.pop_front() {
            self.events
                .push_back(Event::Completion(p.wr.completion(status, 0)));
        }
        self.drop_tx();
        // During a graceful disconnect the failed request carries the error and the teardown
        // the consumer asked for completes as such (as a verbs provider moving the QP to the
        // error state reports the disconnect).
        let fact = if self.drain_deadline.is_some() {
            CmFact::Disconnected
        } else {
            CmFact::Broken
        };
        self.terminate(fact);
        Ok(())
    }
}
