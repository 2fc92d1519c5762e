//! How a connection ends: abrupt and graceful disconnects, the drain of a graceful one,
//! failed connects, and the flush of what is outstanding (see the protocol notes of the
//! parent module).

use std::time::{Duration, Instant};

use dat_core::provider::{CmFact, WorkRequest};
use dat_core::types::DtoStatus;

use super::{Engine, Event, RxCur, State, TransportError};
use crate::wire::{Frame, WireError};

impl Engine {
    /// Tears the connection down at once (abrupt): a connected engine queues a
    /// `Disconnect` after the frames already queued; every state reports `Disconnected` and
    /// flushes what is outstanding. Completions that succeeded were reported before.
    pub fn disconnect(&mut self) {
        self.release_confirm();
        self.drain_deadline = None;
        if matches!(self.state, State::Accepting | State::Connected) {
            Frame::Disconnect.emit(self.processed, &mut self.txq.buf);
        } else {
            self.drop_tx();
        }
        self.terminate(CmFact::Disconnected);
    }

    /// Graceful disconnect: a connected engine with requests outstanding keeps the
    /// connection up until every one of them has completed (acknowledged, or its read
    /// response arrived), reporting their completions, and only then queues the `Disconnect`
    /// and reports `Disconnected` (receives still posted are flushed). If that has not
    /// happened within `limit` of `now` (a peer that never acknowledges), it disconnects
    /// abruptly at that deadline ([`Engine::handle_timeout`]). In every other case it is
    /// [`Engine::disconnect`].
    pub fn disconnect_graceful(&mut self, now: Instant, limit: Duration) {
        if self.state == State::Connected && !self.outstanding.is_empty() {
            if self.drain_deadline.is_none() {
                self.drain_deadline = Some(now.checked_add(limit).unwrap_or(now));
            }
        } else {
            self.disconnect();
        }
    }

    /// True while a graceful disconnect waits for outstanding requests.
    pub fn is_draining(&self) -> bool {
        self.drain_deadline.is_some()
    }

    /// Ends a graceful disconnect once nothing is outstanding any more.
    pub(super) fn check_drain(&mut self) {
        if self.drain_deadline.is_some()
            && self.state == State::Connected
            && self.outstanding.is_empty()
        {
            self.disconnect();
        }
    }

    pub(super) fn fail_connect(&mut self, fact: CmFact) {
        self.state = State::Idle;
        self.reconnect = false;
        self.drop_tx();
        self.events.push_back(Event::Cm(fact));
    }

    pub(super) fn protocol_error(&mut self, e: &WireError) {
        tracing::warn!(error = %e, state = ?self.state, "malformed or unexpected frame from the peer");
        self.handle_transport_error(TransportError::Lost);
    }

    /// Queues a `Nak` for the peer's request `msn` and breaks the connection.
    pub(super) fn nak_and_break(&mut self, msn: u32, status: DtoStatus) {
        Frame::Nak {
            msn,
            status: status as u32,
        }
        .emit(self.processed, &mut self.txq.buf);
        self.terminate(CmFact::Broken);
    }

    /// Reports the suppressed requests that succeeded and are not reported yet, then `fact`,
    /// and flushes everything outstanding: requests in posting order, then the receive being
    /// filled, then the posted receives. Every end of a connection comes here.
    pub(super) fn terminate(&mut self, fact: CmFact) {
        self.report_quiet();
        self.state = State::Closed;
        self.drain_deadline = None;
        self.rnr_deadline = None;
        self.parked_msn = None;
        self.responses.clear();
        self.rx_stream = None;
        self.events.push_back(Event::Cm(fact));
        for p in std::mem::take(&mut self.outstanding) {
            self.flush_one(&p.wr);
        }
        self.tx_idx = 0;
        self.tx_off = 0;
        if let Some(RxCur::Send { recv, .. }) = self.rx_cur.take() {
            self.flush_one(&recv);
        }
        for wr in std::mem::take(&mut self.recvs) {
            self.flush_one(&wr);
        }
    }

    pub(super) fn flush_one(&mut self, wr: &WorkRequest) {
        self.events
            .push_back(Event::Completion(wr.completion(DtoStatus::Flushed, 0)));
    }
}
