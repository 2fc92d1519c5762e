//! The active side of connection establishment: the request, and the retries of a
//! request that found nobody listening (see the protocol notes of the parent module).

use std::time::Instant;

use dat_core::provider::CmFact;

use super::{Engine, RETRY_FIRST, RETRY_MAX, State, TransportError, duration_ms};
use crate::wire::Frame;

impl Engine {
    /// Starts an active connection at `now`: queues the request. `deadline` is the
    /// consumer's timeout (`None`: infinite).
    pub fn connect(
        &mut self,
        now: Instant,
        qual: u64,
        private_data: &[u8],
        deadline: Option<Instant>,
    ) {
        self.state = State::Connecting { deadline };
        self.retry_until = now.checked_add(self.cfg.connect_retry);
        self.retry_backoff = RETRY_FIRST;
        self.reconnect = false;
        self.conn_req = Some((qual, private_data.into()));
        self.queue_conn_req();
    }

    fn queue_conn_req(&mut self) {
        let rnr_timeout_ms = duration_ms(self.cfg.rnr_timeout);
        if let Some((qual, private_data)) = &self.conn_req {
            Frame::ConnReq {
                rnr_timeout_ms,
                qual: *qual,
                private_data,
            }
            .emit(0, &mut self.txq.buf);
        }
    }

    /// Nobody listens for our request at `now` (the TCP connect was refused, or the
    /// listener answered `NoListener`): while the retry window lasts the engine waits a
    /// backoff (its socket is to be closed) and then asks for a new one
    /// ([`Engine::take_reconnect`]); after it, `NonPeerRejected`. Ignored in other states.
    pub fn connect_refused(&mut self, now: Instant) {
        let State::Connecting { deadline } = self.state else {
            return;
        };
        self.drop_tx();
        match self.retry_until {
            Some(until) if now < until => {
                let at = now
                    .checked_add(self.retry_backoff)
                    .unwrap_or(until)
                    .min(until);
                self.retry_backoff = (self.retry_backoff * 2).min(RETRY_MAX);
                tracing::debug!(backoff = ?at.saturating_duration_since(now), "connect refused: retrying");
                self.state = State::Retrying { deadline, at };
            }
            _ => self.fail_connect(CmFact::NonPeerRejected),
        }
    }

    /// A failure of an active connect's socket at `now`: a refusal is
    /// [`Engine::connect_refused`], anything else [`Engine::handle_transport_error`].
    pub fn handle_connect_error(&mut self, now: Instant, err: TransportError) {
        match err {
            TransportError::Refused => self.connect_refused(now),
            _ => self.handle_transport_error(err),
        }
    }

    /// True (once) when a retry of a refused connect is due: the request is queued again
    /// and the driver must connect a new socket to the same address.
    pub fn take_reconnect(&mut self) -> bool {
        std::mem::take(&mut self.reconnect)
    }

    /// The deadlines of connection establishment at `now`: the consumer's timeout
    /// (`TimedOut`, also while waiting to retry), and the end of a retry's backoff (the
    /// request is queued again for a new socket).
    pub(super) fn connect_timeout(&mut self, now: Instant) {
        if let State::Connecting { deadline: Some(d) }
        | State::Retrying {
            deadline: Some(d), ..
        } = self.state
            && now >= d
        {
            self.fail_connect(CmFact::TimedOut);
        }
        if let State::Retrying { deadline, at } = self.state
            && now >= at
        {
            self.state = State::Connecting { deadline };
            self.drop_tx();
            self.queue_conn_req();
            self.reconnect = true;
        }
    }
}
