//! The sans-IO protocol engine of one connection (one endpoint), in the style of
//! `quinn-proto`: the driver feeds it bytes ([`Engine::handle_input`]), transport failures
//! ([`Engine::handle_transport_error`]) and the time ([`Engine::handle_timeout`]), and drains
//! bytes to send ([`Engine::poll_transmit`]), facts to report ([`Engine::poll_event`]) and
//! the next deadline ([`Engine::poll_timeout`]). It never touches a socket or a clock, so it
//! is tested in memory with a virtual clock.
//!
//! # Protocol
//! * Active side: [`Engine::connect`] queues a `ConnReq`; an `Accept` queues `Rtu`, and the
//!   passive side's `Confirm` then gives `Established { private_data }` (the accept's); a
//!   `Reject` gives `PeerRejected`. The passive side reports its `Established` before it
//!   confirms, so the active side's consumer cannot act on a connection (disconnect another
//!   one, say) before the passive side knows it is up: events reach the passive side in the
//!   order the active side caused them, across connections, as IB's CM delivers them
//!   (consumers such as dtestcm count on it; each connection has its own socket, so nothing
//!   else orders them).
//! * Nobody listening (the TCP connect refused, [`Engine::connect_refused`], or the
//!   listener's `NoListener`: no service point has the request's qualifier) is retried,
//!   as InfiniBand's CM retries a request, after a short backoff ([`RETRY_FIRST`] doubling
//!   up to [`RETRY_MAX`]) until the endpoint's retry window
//!   ([`EngineConfig::connect_retry`]) has passed; then `NonPeerRejected`. The consumer's
//!   connect timeout, if it comes first, still gives `TimedOut`. The driver opens a new
//!   socket when [`Engine::take_reconnect`] says so.
//! * Passive side: the driver reads the `ConnReq` of a new socket with [`parse_request`];
//!   [`Engine::accept`] queues `Accept`; the `Rtu` gives `Established`, and the driver
//!   releases the `Confirm` once that has been reported ([`Engine::release_confirm`]).
//! * Requests (send, RDMA write, RDMA read) get message sequence numbers (MSN) from 1. The
//!   target executes them in order and acknowledges cumulatively in the header of every frame
//!   it sends (a bare `Ack` only when it has nothing else to send). A send or RDMA write
//!   completes when acknowledged, an RDMA read when its response has arrived; completions
//!   are reported in posting order.
//! * A send that finds no receive posted at the target waits there (the target stops
//!   reading that connection: back-pressure, nothing dropped) for up to the requester's
//!   receiver-not-ready timeout, then the target answers `Nak(RECEIVER_NOT_READY)`.
//! * Errors at the target (`LOCAL_LENGTH` on a receive that is too small, protection
//!   failures of an incoming RDMA checked with [`MemTable::remote`] before any byte is
//!   touched) are reported locally, answered with a `Nak` carrying the requester's status, and
//!   break both sides.
//! * Disconnect: abrupt ([`Engine::disconnect`]) queues a `Disconnect` and reports
//!   `Disconnected` at once, flushing what is outstanding. Graceful
//!   ([`Engine::disconnect_graceful`]) first lets the requests already posted finish (their
//!   successful completions come before `Disconnected`; a request the peer refuses carries
//!   its error), bounded by a deadline after which it is abrupt.
//! * A malformed frame, an unexpected frame or a lost socket breaks the connection; the
//!   engine then reports the terminal fact and flushes everything outstanding, requests
//!   first, then receives, each in posting order.
//!
//! [`MemTable::remote`]: dat_core::mem::MemTable::remote

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dat_core::mem::Segment;
use dat_core::provider::{CmFact, Completion, SharedMemTable, WorkRequest};
use dat_core::types::{DtoStatus, PzId};

use crate::wire::{Decoded, Frame, Kind, WireError};

mod active;
mod close;
mod data;
mod requests;
mod stream;
mod transmit;
mod txq;

pub use txq::TxPiece;
use txq::TxQueue;

/// Smallest payload piece queued by reference in zero-copy mode.
pub const ZERO_COPY_MIN: usize = 16 * 1024;

/// A shared receive queue as engines see it: receives in posting order.
pub type SharedSrq = Arc<Mutex<VecDeque<WorkRequest>>>;

/// What an engine reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A DTO completed (successfully, with an error, or flushed).
    Completion(Completion),
    /// A connection fact.
    Cm(CmFact),
    /// This many requests posted with `DAT_COMPLETION_SUPPRESS_FLAG` completed successfully
    /// (`EpUpcalls::retired`: one event for all those since the last report, not one each;
    /// see [`Engine::poll_event`] for when).
    Retired(u32),
}

/// How the byte stream under a connection failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportError {
    /// Nobody listens at the address (`ECONNREFUSED`).
    Refused,
    /// No route to the address (`ENETUNREACH`, `EHOSTUNREACH`).
    Unreachable,
    /// The peer closed the stream without a `Disconnect`, or it reset.
    Lost,
}

/// What the engine needs of its endpoint.
#[derive(Clone)]
pub struct EngineConfig {
    /// The IA's memory table (target-side checks of incoming RDMA).
    pub mem: SharedMemTable,
    /// The endpoint's protection zone.
    pub pz: Option<PzId>,
    /// The shared receive queue the endpoint takes receives from, if any.
    pub srq: Option<SharedSrq>,
    /// How long our sends may wait at the peer for a receive (sent to the peer, which
    /// enforces it).
    pub rnr_timeout: Duration,
    /// How long after [`Engine::connect`] a connect that finds nobody listening is retried
    /// (zero: never).
    pub connect_retry: Duration,
}

/// First backoff before a refused connect is retried.
pub const RETRY_FIRST: Duration = Duration::from_millis(10);
/// Longest backoff between retries of a refused connect.
pub const RETRY_MAX: Duration = Duration::from_millis(100);

/// A connection request read from a new passive socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncomingRequest {
    /// The qualifier the requester asked for.
    pub qual: u64,
    /// The requester's receiver-not-ready timeout.
    pub rnr_timeout: Duration,
    /// The requester's private data.
    pub private_data: Box<[u8]>,
}

/// Reads the connection request at the start of a new passive socket's bytes. Returns the
/// request and the bytes it used, or `Ok(None)` until it is complete.
///
/// # Errors
/// [`WireError`] for malformed bytes or any other first frame: the driver drops the socket.
pub fn parse_request(input: &[u8]) -> Result<Option<(IncomingRequest, usize)>, WireError> {
    match Frame::parse(input)? {
        None => Ok(None),
        Some(Decoded {
            frame:
                Frame::ConnReq {
                    rnr_timeout_ms,
                    qual,
                    private_data,
                },
            len,
            ..
        }) => Ok(Some((
            IncomingRequest {
                qual,
                rnr_timeout: Duration::from_millis(u64::from(rnr_timeout_ms)),
                private_data: private_data.into(),
            },
            len,
        ))),
        Some(d) => Err(WireError::Kind(d.frame.kind() as u8)),
    }
}

/// Encodes a reject (sent by the driver on a passive socket that never became an engine's).
pub fn encode_reject(private_data: &[u8], out: &mut Vec<u8>) {
    Frame::Reject { private_data }.emit(0, out);
}

/// Encodes the answer to a request for a qualifier that no service point on the port has
/// (another qualifier folded onto the same TCP port; see [`crate::params`]).
pub fn encode_no_listener(out: &mut Vec<u8>) {
    Frame::NoListener.emit(0, out);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// No connection (new, reset, rejected, timed out).
    Idle,
    /// Active: `ConnReq` queued or sent, waiting for the answer.
    Connecting { deadline: Option<Instant> },
    /// Active: nobody was listening; a new attempt starts at `at` (no socket meanwhile).
    Retrying {
        deadline: Option<Instant>,
        at: Instant,
    },
    /// Passive: `Accept` queued or sent, waiting for `Rtu`.
    Accepting,
    /// Data flows.
    Connected,
    /// Terminal: the fact was reported and everything flushed; only queued bytes still go
    /// out (a `Nak` or a `Disconnect`).
    Closed,
}

/// A request of ours, from post to completion.
struct Pending {
    msn: u32,
    wr: WorkRequest,
    len: u32,
    /// RDMA read: bytes of the response placed so far; `done` once complete.
    read_pos: u32,
    done: bool,
}

/// The message being received from the peer, piece by piece.
enum RxCur {
    Send {
        msn: u32,
        recv: WorkRequest,
        total: u32,
        pos: u32,
    },
    Write {
        msn: u32,
        seg: Option<Segment>,
        total: u32,
        pos: u32,
    },
}

/// What a payload being streamed belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Streaming {
    Send,
    Write,
    ReadResp,
}

/// The rest of a data piece's payload, still to arrive (zero-copy receive).
#[derive(Clone, Copy, Debug)]
struct RxStream {
    kind: Streaming,
    msn: u32,
    total: u32,
    flags: u8,
    /// Message position of the next byte.
    at: u64,
    /// Payload bytes still to come.
    left: usize,
}

/// An RDMA read we answer, piece by piece.
struct ReadResp {
    msn: u32,
    seg: Option<Segment>,
    total: u32,
    pos: u32,
}

/// How far [`Engine::handle_input`] may go.
enum Flow {
    Next,
    Park,
    Stop,
}

/// Bytes of queued frames above which the engine stops generating data frames.
const TX_HIGH_WATER: usize = 256 * 1024;
/// In delayed-ack mode, a bare `Ack` goes out once this many requests wait for it...
const ACK_EVERY: u32 = 8;
/// ...or once the oldest has waited this long.
const ACK_DELAY: Duration = Duration::from_micros(20);

/// The protocol state of one endpoint's connection.
pub struct Engine {
    cfg: EngineConfig,
    state: State,
    events: VecDeque<Event>,
    txq: TxQueue,
    /// Large payloads are queued by reference ([`Engine::poll_transmit_pieces`]).
    zero_copy: bool,
    /// Receives posted on the endpoint (not used with an SRQ), in posting order.
    recvs: VecDeque<WorkRequest>,
    // Requester.
    outstanding: VecDeque<Pending>,
    next_msn: u32,
    /// Index in `outstanding` of the next request to transmit, and bytes of it sent.
    tx_idx: usize,
    tx_off: u32,
    /// MSN of the last request fully transmitted, and the peer's cumulative ack.
    last_sent: u32,
    peer_acked: u32,
    // Responder.
    peer_rnr: Duration,
    processed: u32,
    ack_sent: u32,
    rx_cur: Option<RxCur>,
    rx_stream: Option<RxStream>,
    responses: VecDeque<ReadResp>,
    rnr_deadline: Option<Instant>,
    parked_msn: Option<u32>,
    /// When the oldest unacknowledged executed request must be acknowledged (delayed mode).
    ack_due: Option<Instant>,
    /// `None`: bare acks go out at once; `Some(now)`: delayed-ack mode at time `now`.
    ack_clock: Option<Instant>,
    /// Graceful disconnect in progress: the connection closes once every request is
    /// acknowledged, or at this deadline (then abruptly).
    drain_deadline: Option<Instant>,
    /// The active side's request (qualifier, private data), queued again on each retry.
    conn_req: Option<(u64, Box<[u8]>)>,
    /// Until when a refused connect is retried, and the next backoff.
    retry_until: Option<Instant>,
    retry_backoff: Duration,
    /// A retry is due: the driver must open a new socket ([`Engine::take_reconnect`]).
    reconnect: bool,
    /// Active side: the acceptor's private data, held from its `Accept` until its `Confirm`.
    confirming: Option<Box<[u8]>>,
    /// Passive side: the `Confirm` waits until `Established` has been reported
    /// ([`Engine::release_confirm`]).
    confirm_held: bool,
    /// Requests posted with `DAT_COMPLETION_SUPPRESS_FLAG` that completed successfully and
    /// are not reported yet: held back until a later request's completion or the end of the
    /// connection ([`Engine::retired_unreported`]).
    quiet_done: u64,
}

impl Engine {
    /// An idle engine.
    pub fn new(cfg: EngineConfig) -> Engine {
        Engine {
            cfg,
            state: State::Idle,
            events: VecDeque::new(),
            txq: TxQueue::default(),
            zero_copy: false,
            recvs: VecDeque::new(),
            outstanding: VecDeque::new(),
            next_msn: 1,
            tx_idx: 0,
            tx_off: 0,
            last_sent: 0,
            peer_acked: 0,
            peer_rnr: Duration::ZERO,
            processed: 0,
            ack_sent: 0,
            rx_cur: None,
            rx_stream: None,
            responses: VecDeque::new(),
            rnr_deadline: None,
            parked_msn: None,
            ack_due: None,
            ack_clock: None,
            drain_deadline: None,
            conn_req: None,
            retry_until: None,
            retry_backoff: RETRY_FIRST,
            reconnect: false,
            confirming: None,
            confirm_held: false,
            quiet_done: 0,
        }
    }

    /// Chooses how bare acknowledgements go out. `None` (the default): as soon as there is
    /// something to acknowledge. `Some(now)`: only piggy-backed on other frames, unless
    /// eight requests wait or the oldest has waited 20 µs at `now`. An
    /// application thread that polls uses the delayed mode (its reply usually carries the
    /// ack); the driver thread acknowledges at once, so an ack is never held indefinitely.
    pub fn set_ack_clock(&mut self, clock: Option<Instant>) {
        self.ack_clock = clock;
    }

    /// Changes the protection zone and SRQ (`dat_ep_modify`, only while unconnected).
    pub fn set_binding(&mut self, pz: Option<PzId>, srq: Option<SharedSrq>) {
        self.cfg.pz = pz;
        self.cfg.srq = srq;
    }

    /// True while a connection is being set up (or retried) or is up.
    pub fn is_active(&self) -> bool {
        matches!(
            self.state,
            State::Connecting { .. } | State::Retrying { .. } | State::Accepting | State::Connected
        )
    }

    /// True when the connection is up.
    pub fn is_connected(&self) -> bool {
        self.state == State::Connected
    }

    /// True when the engine has no connection any more (or never had one, or waits to
    /// retry a refused connect): the driver closes the socket once
    /// [`Engine::poll_transmit`] is empty.
    pub fn is_closed(&self) -> bool {
        matches!(
            self.state,
            State::Idle | State::Closed | State::Retrying { .. }
        )
    }

    /// True while an incoming send waits for a receive (the driver stops reading).
    pub fn is_parked(&self) -> bool {
        self.parked_msn.is_some()
    }

    /// True if [`Engine::poll_event`] has a fact to report.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// True if requests of the peer have been executed but not acknowledged yet (whether a
    /// bare `Ack` is due then depends on the clock given to [`Engine::set_ack_clock`]).
    pub fn ack_pending(&self) -> bool {
        self.processed != self.ack_sent
    }

    /// True if a request of ours waits to be framed: its frame will carry the
    /// acknowledgement, so no bare `Ack` needs deciding on.
    pub fn request_waiting(&self) -> bool {
        self.state == State::Connected && self.tx_idx < self.outstanding.len()
    }

    /// Returns an endpoint to its initial state for a new connection (`dat_ep_reset`). Queued
    /// bytes are dropped; receives posted since are kept; suppressed requests that completed
    /// and were not reported yet are reported now (none are left once a connection ended).
    pub fn reset(&mut self) {
        self.report_quiet();
        let recvs = std::mem::take(&mut self.recvs);
        let events = std::mem::take(&mut self.events);
        let mut txq = std::mem::take(&mut self.txq);
        txq.clear();
        let zero_copy = self.zero_copy;
        *self = Engine::new(self.cfg.clone());
        self.recvs = recvs;
        self.events = events;
        self.txq = txq;
        self.zero_copy = zero_copy;
    }

    /// Accepts a request read with [`parse_request`] on this engine's endpoint: queues the
    /// accept; `Established` follows the requester's `Rtu`.
    pub fn accept(&mut self, peer_rnr: Duration, private_data: &[u8]) {
        self.state = State::Accepting;
        self.peer_rnr = peer_rnr;
        Frame::Accept {
            rnr_timeout_ms: duration_ms(self.cfg.rnr_timeout),
            private_data,
        }
        .emit(0, &mut self.txq.buf);
    }

    /// True while the passive side's `Confirm` waits for [`Engine::release_confirm`].
    pub fn is_confirm_held(&self) -> bool {
        self.confirm_held
    }

    /// The passive side's `Established` has been reported to the consumer: the `Confirm`
    /// goes out (see the protocol notes). The consumer's first post or disconnect releases it
    /// too, as it can only come after the report.
    pub fn release_confirm(&mut self) {
        if std::mem::take(&mut self.confirm_held) && self.state == State::Connected {
            Frame::Confirm.emit(0, &mut self.txq.buf);
        }
    }

    /// Posts a work request. Receives are kept in every state until a connection takes
    /// them (and flushed once it is closed); requests are queued when connected and
    /// flushed otherwise.
    pub fn post(&mut self, wr: WorkRequest) {
        match wr.op {
            dat_core::provider::PostOp::Recv => {
                if self.state == State::Closed {
                    self.flush_one(&wr);
                } else {
                    self.recvs.push_back(wr);
                }
            }
            _ if self.state != State::Connected => self.flush_one(&wr),
            _ => {
                self.release_confirm();
                let len = u32::try_from(wr.len()).unwrap_or(u32::MAX);
                let msn = self.next_msn;
                self.next_msn = self.next_msn.wrapping_add(1);
                self.outstanding.push_back(Pending {
                    msn,
                    wr,
                    len,
                    read_pos: 0,
                    done: false,
                });
            }
        }
    }

    /// Feeds bytes read from the socket. Returns how many were used: whole frames only,
    /// and none past a send that waits for a receive ([`Engine::is_parked`]) or past the
    /// end of the connection. The caller keeps the rest and offers it again later.
    pub fn handle_input(&mut self, now: Instant, input: &[u8]) -> usize {
        let mut used = 0;
        loop {
            self.check_drain();
            if self.is_closed() {
                break;
            }
            let rest = input.get(used..).unwrap_or_default();
            if rest.is_empty() {
                // Everything used (the usual end: whole frames were read): no header to
                // look for, no piece to continue.
                break;
            }
            if self.rx_stream.is_some() {
                let before = self.rx_stream.map_or(0, |s| s.left);
                self.stream_place(now, rest);
                used += before.min(rest.len());
                continue;
            }
            match Frame::parse(rest) {
                Ok(None) => {
                    // The start of a large data piece: execute it now and let the rest of
                    // its payload stream in (straight into memory through `rx_direct`).
                    if !self.zero_copy {
                        break;
                    }
                    if self.state != State::Connected {
                        // A data piece outside a connection is unexpected: say so now rather
                        // than wait for a payload that may never fit.
                        if let Ok(Some(p)) = Frame::parse_partial(rest) {
                            self.protocol_error(&WireError::Kind(p.frame.kind() as u8));
                        }
                        break;
                    }
                    match Frame::parse_partial(rest) {
                        Ok(Some(p)) if p.payload_len >= ZERO_COPY_MIN => {
                            match self.handle_partial(now, p.frame, p.ack, p.payload_len) {
                                Flow::Next => {
                                    used += p.len;
                                    continue;
                                }
                                Flow::Park => break,
                                Flow::Stop => {
                                    used += p.len;
                                    break;
                                }
                            }
                        }
                        Ok(_) => {}
                        Err(e) => self.protocol_error(&e),
                    }
                    break;
                }
                Err(e) => {
                    self.protocol_error(&e);
                    break;
                }
                Ok(Some(d)) => match self.handle_frame(now, d.frame, d.ack) {
                    Flow::Next => used += d.len,
                    Flow::Park => break,
                    Flow::Stop => {
                        used += d.len;
                        break;
                    }
                },
            }
        }
        self.check_drain();
        used
    }

    /// Handles one decoded frame with its header's acknowledgement.
    fn handle_frame(&mut self, now: Instant, frame: Frame<'_>, ack: u32) -> Flow {
        match (self.state, frame) {
            (
                State::Connecting { .. },
                Frame::Accept {
                    rnr_timeout_ms,
                    private_data,
                },
            ) => {
                if self.confirming.is_some() {
                    self.protocol_error(&WireError::Kind(Kind::Accept as u8));
                    return Flow::Stop;
                }
                self.peer_rnr = Duration::from_millis(u64::from(rnr_timeout_ms));
                self.confirming = Some(private_data.into());
                Frame::Rtu.emit(0, &mut self.txq.buf);
                Flow::Next
            }
            (State::Connecting { .. }, Frame::Confirm) => {
                let Some(private_data) = self.confirming.take() else {
                    self.protocol_error(&WireError::Kind(Kind::Confirm as u8));
                    return Flow::Stop;
                };
                self.state = State::Connected;
                self.events
                    .push_back(Event::Cm(CmFact::Established { private_data }));
                Flow::Next
            }
            (State::Connecting { .. }, Frame::NoListener) => {
                self.connect_refused(now);
                Flow::Stop
            }
            (State::Connecting { .. }, Frame::Reject { private_data }) => {
                self.state = State::Idle;
                self.drop_tx();
                self.events.push_back(Event::Cm(CmFact::PeerRejected {
                    private_data: private_data.into(),
                }));
                Flow::Stop
            }
            (State::Accepting, Frame::Rtu) => {
                self.state = State::Connected;
                self.confirm_held = true;
                self.events.push_back(Event::Cm(CmFact::Established {
                    private_data: Box::default(),
                }));
                Flow::Next
            }
            (State::Connected, f) => {
                if let Err(e) = self.on_ack(ack) {
                    self.protocol_error(&e);
                    return Flow::Stop;
                }
                match self.handle_data(now, f, None) {
                    Ok(flow) => flow,
                    Err(e) => {
                        self.protocol_error(&e);
                        Flow::Stop
                    }
                }
            }
            (_, f) => {
                self.protocol_error(&WireError::Kind(f.kind() as u8));
                Flow::Stop
            }
        }
    }

    /// The start of a data piece while connected (see [`Engine::handle_input`]).
    fn handle_partial(&mut self, now: Instant, frame: Frame<'_>, ack: u32, whole: usize) -> Flow {
        if let Err(e) = self.on_ack(ack) {
            self.protocol_error(&e);
            return Flow::Stop;
        }
        match self.handle_data(now, frame, Some(whole)) {
            Ok(flow) => flow,
            Err(e) => {
                self.protocol_error(&e);
                Flow::Stop
            }
        }
    }

    /// Where the next incoming payload bytes belong when a large piece is arriving and the
    /// caller has no buffered input left: `len` bytes of `seg` from `off`. The driver reads
    /// the socket straight into that memory and reports the count with
    /// [`Engine::rx_direct_done`].
    pub fn rx_direct(&self) -> Option<(&Segment, usize, usize)> {
        if self.state != State::Connected {
            return None;
        }
        self.stream_dest()
    }

    /// `n` bytes were read straight into the memory [`Engine::rx_direct`] named.
    pub fn rx_direct_done(&mut self, now: Instant, n: usize) {
        self.stream_advance(now, n);
        self.check_drain();
    }

    /// The stream under the connection failed.
    pub fn handle_transport_error(&mut self, err: TransportError) {
        match (self.state, err) {
            (State::Connecting { .. }, TransportError::Unreachable) => {
                self.fail_connect(CmFact::Unreachable);
            }
            (State::Connecting { .. }, _) => self.fail_connect(CmFact::NonPeerRejected),
            (State::Accepting, _) => {
                self.drop_tx();
                self.terminate(CmFact::AcceptCompletionError);
            }
            (State::Connected, _) => {
                self.drop_tx();
                self.terminate(CmFact::Broken);
            }
            (State::Idle | State::Closed | State::Retrying { .. }, _) => self.drop_tx(),
        }
    }

    /// Fires the deadlines that `now` has reached: the consumer's connect timeout
    /// (`TimedOut`) and the receiver-not-ready timeout of a waiting incoming send.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.connect_timeout(now);
        if let (Some(d), Some(msn)) = (self.rnr_deadline, self.parked_msn)
            && now >= d
            && self.state == State::Connected
        {
            tracing::debug!(msn, "receiver not ready: no receive posted in time");
            self.nak_and_break(msn, DtoStatus::ReceiverNotReady);
        }
        if let Some(d) = self.drain_deadline
            && now >= d
            && self.state == State::Connected
        {
            tracing::debug!(
                outstanding = self.outstanding.len(),
                "graceful disconnect: requests still unacknowledged at the deadline, disconnecting abruptly"
            );
            self.disconnect();
        }
    }

    /// The next deadline, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Connecting { deadline } => deadline,
            State::Retrying { deadline, at } => Some(deadline.map_or(at, |d| d.min(at))),
            // Asked after every call into the engine: the usual answer (connected, no send
            // waiting for a receive, no graceful disconnect) comes without building a list.
            State::Connected => match (self.rnr_deadline, self.drain_deadline) {
                (None, None) => None,
                (Some(r), None) => Some(r),
                (None, Some(d)) => Some(d),
                (Some(r), Some(d)) => Some(r.min(d)),
            },
            _ => None,
        }
    }

    /// The next fact to report. Successful completions of requests posted with
    /// `DAT_COMPLETION_SUPPRESS_FLAG` are not reported one by one (the consumer would never
    /// see them): they are counted, and the count is one [`Event::Retired`] queued just
    /// before the completion of a later request or the end of the connection (its terminal
    /// fact), or at [`Engine::reset`]. Until then [`Engine::retired_unreported`] tells it.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Requests posted with `DAT_COMPLETION_SUPPRESS_FLAG` that completed successfully and
    /// are not reported by an [`Event::Retired`] yet (`Transport::retired_unreported`).
    pub fn retired_unreported(&self) -> u64 {
        self.quiet_done
    }

    /// Moves every fact to report to the end of `out`, in order ([`Engine::poll_event`] for
    /// all of them at once: into an empty `out`, the two queues are swapped, no event moved).
    pub fn take_events(&mut self, out: &mut VecDeque<Event>) {
        if out.is_empty() {
            std::mem::swap(&mut self.events, out);
        } else {
            out.append(&mut self.events);
        }
    }

    /// Bytes to write to the socket (empty when there are none). Generates data frames up
    /// to a high-water mark; call [`Engine::advance_transmit`] with what was written.
    /// Payloads queued by reference are copied here; [`Engine::poll_transmit_pieces`] avoids
    /// that.
    pub fn poll_transmit(&mut self) -> &[u8] {
        if self.state == State::Connected {
            self.fill_tx();
        }
        self.txq.contiguous()
    }

    /// The bytes to write as runs, for a vectored write: frame bytes, and (with
    /// [`Engine::set_zero_copy`]) large payloads as ranges of registered memory. Call
    /// [`Engine::advance_transmit`] with what was written.
    pub fn poll_transmit_pieces(&mut self) -> impl Iterator<Item = TxPiece<'_>> {
        if self.state == State::Connected {
            self.fill_tx();
        }
        self.txq.pieces()
    }

    /// Queues payloads of at least [`ZERO_COPY_MIN`] bytes by reference instead of copying
    /// them into the transmit buffer.
    pub fn set_zero_copy(&mut self, on: bool) {
        self.zero_copy = on;
    }

    /// True if [`Engine::poll_transmit`] would return bytes.
    pub fn wants_transmit(&self) -> bool {
        !self.txq.is_empty()
            || (self.state == State::Connected
                && (self.tx_idx < self.outstanding.len()
                    || !self.responses.is_empty()
                    || self.bare_ack_due()))
    }

    /// Marks `n` bytes of [`Engine::poll_transmit`] as written.
    pub fn advance_transmit(&mut self, n: usize) {
        self.txq.advance(n);
    }

    fn drop_tx(&mut self) {
        self.txq.clear();
    }
}

fn duration_ms(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// `a <= b` in wrapping sequence space.
fn seq_le(a: u32, b: u32) -> bool {
    b.wrapping_sub(a) < 1 << 31
}

#[cfg(test)]
mod tests;
