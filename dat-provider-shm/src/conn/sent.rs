//! The requests of a connection that are wholly in the ring: a 32-byte entry each, and their
//! completion once the target's head has passed them.

use std::sync::Arc;

use dat_core::provider::{Completion, EpUpcalls};
use dat_core::types::{CompletionFlags, Cookie, DtoOp, DtoStatus};

use super::{DataPath, Up, Ups};

/// A request whose records are all in the ring, not completed yet: what its completion
/// needs (32 bytes). Its work request is let go of once pushed, unless the ring names its
/// memory (see `held`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Sent {
    /// Index after its last record: it is complete once the target's head reaches it.
    pub(super) end: u64,
    pub(super) cookie: Cookie,
    /// Its length (what a success reports).
    pub(super) len: u32,
    pub(super) flags: CompletionFlags,
    pub(super) op: DtoOp,
    /// It completes with the target's data (an RDMA read through the ring), not the head.
    pub(super) by_data: bool,
    /// Its work request waits in [`DataPath::held`]: the peer may copy from or into its
    /// memory by cross-memory attach, or the data of a read is to be placed there.
    pub(super) held: bool,
}

impl Sent {
    pub(super) fn quiet(&self) -> bool {
        self.flags.contains(CompletionFlags::SUPPRESS)
    }

    pub(super) fn completion(&self, status: DtoStatus, transferred: u32) -> Completion {
        Completion::of(self.cookie, self.op, self.flags, status, transferred)
    }
}

impl DataPath {
    /// Removes the oldest request of the ring (complete or failed), and its work request if
    /// held; counts it out of `wanted`.
    pub(super) fn pop_sent(&mut self) -> Option<Sent> {
        let s = self.sent.pop_front()?;
        if s.held {
            self.held.pop_front();
        }
        if !s.quiet() {
            self.wanted = self.wanted.saturating_sub(1);
        }
        Some(s)
    }

    /// Completes, successfully, the requests the target's head has passed (up to an RDMA
    /// read that waits for its data). Returns whether any completed.
    pub(super) fn retire(&mut self, upcalls: &Arc<dyn EpUpcalls>, out: &mut Ups) -> bool {
        let acked = self.tx.acked();
        let mut any = false;
        while let Some(&s) = self.sent.front() {
            if s.by_data || s.end > acked {
                break;
            }
            self.sent.pop_front();
            if s.held {
                self.held.pop_front();
            }
            any = true;
            // A successful completion the consumer suppressed is dropped by the core
            // anyway: no upcall for it (the common case of a streaming sender), only a
            // count, reported before the next completion of a request, at the end of the
            // connection, or asked for (`retired_unreported`). Reporting each run cost a
            // ping-pong an upcall per message (shm 8 B 0.22 -> 0.26 us).
            if s.quiet() {
                self.quiet_done += 1;
            } else {
                self.wanted = self.wanted.saturating_sub(1);
                self.report_quiet(upcalls, out);
                out.push(Up::Done(
                    upcalls.clone(),
                    s.completion(DtoStatus::Success, s.len),
                ));
            }
        }
        any
    }

    /// Queues the count of suppressed requests completed since the last report
    /// (`EpUpcalls::retired`), if any. Called before any later completion of a request is
    /// queued and when the connection ends, so that the count is out before the consumer
    /// can see a completion of a request posted after them.
    pub(super) fn report_quiet(&mut self, upcalls: &Arc<dyn EpUpcalls>, out: &mut Ups) {
        while self.quiet_done > 0 {
            let n = u32::try_from(self.quiet_done).unwrap_or(u32::MAX);
            out.push(Up::Retired(upcalls.clone(), n));
            self.quiet_done -= u64::from(n);
        }
    }

    /// Suppressed requests completed successfully and not reported yet
    /// (`Transport::retired_unreported`).
    pub fn retired_unreported(&self) -> u64 {
        self.quiet_done
    }

    /// [`DataPath::retire`] of the oldest requests as long as their completions are
    /// suppressed (no upcall: callable where none may be made), so that a sender that never
    /// polls does not pile them up.
    pub(super) fn retire_quiet(&mut self) {
        let acked = self.tx.acked();
        while let Some(&s) = self.sent.front() {
            if s.by_data || s.end > acked || !s.quiet() {
                break;
            }
            self.sent.pop_front();
            if s.held {
                self.held.pop_front();
            }
            self.quiet_done += 1;
        }
    }
}
