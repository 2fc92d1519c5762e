//! One end of a datperf connection: an IA with its PZ, EVDs, the data EP and one registered
//! buffer, plus the polling / waiting event loop.

use std::time::{Duration, Instant};

use dat::types::{EvdFlags, EventNumber, MemPriv, Timeout};
use dat::{
    DatError, DtoCompletion, Ep, EpParams, EpState, Evd, Event, EventData, Ia, Lmr, Pz, Registry,
};

use crate::error::{DatContext, PerfError, PerfResult};

/// How completions are collected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// `Evd::dequeue` in a loop (busy polling).
    #[default]
    Poll,
    /// `Evd::wait` (the library's spin-then-sleep wait).
    Wait,
}

impl Mode {
    /// `poll` or `wait`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Poll => "poll",
            Mode::Wait => "wait",
        }
    }
}

/// The longest single `Evd::wait` in [`Mode::Wait`].
pub const WAIT_SLICE: Duration = Duration::from_millis(1);

/// Depth of the DTO EVD; windows are clamped below it.
pub const DTO_QLEN: i32 = 1024;

/// An opened IA with everything a measurement needs.
#[derive(Debug)]
pub struct Side {
    /// The IA.
    pub ia: Ia,
    /// Protection zone of the buffer and EPs.
    pub pz: Pz,
    /// Connection events of the data EP.
    pub conn: Evd,
    /// Connection events of the connection-rate test's EPs.
    pub conn2: Evd,
    /// Connection requests (server).
    pub cr: Evd,
    /// All DTO completions.
    pub dto: Evd,
    /// The data EP.
    pub ep: Ep,
    /// The buffer: twice the largest size (a send half and a receive half).
    pub lmr: Lmr,
    /// Polling or waiting.
    pub mode: Mode,
    /// Longest wait for any one event.
    pub timeout: Duration,
}

impl Side {
    /// Opens IA `name` (`None`: `$DAT_IA`, else the configuration's default) and creates the
    /// objects, with a buffer of `2 * max_size` bytes.
    ///
    /// # Errors
    /// [`PerfError::Open`] when the IA cannot be opened (unknown name:
    /// `DAT_PROVIDER_NOT_FOUND|DAT_NAME_NOT_REGISTERED`; provider not compiled in:
    /// `DAT_PROVIDER_NOT_FOUND`); [`PerfError::Dat`] with the code of the create call that
    /// failed (`DAT_INSUFFICIENT_RESOURCES` for a buffer above the IA's limits).
    pub fn open(
        reg: &Registry,
        name: Option<&str>,
        max_size: u64,
        mode: Mode,
        timeout: Duration,
    ) -> PerfResult<Side> {
        Side::on_ia(reg.open_ia(name, 8)?, max_size, mode, timeout)
    }

    /// As [`Side::open`], on an IA already open (both ends of a pair may share one IA).
    ///
    /// # Errors
    /// As [`Side::open`], less the open.
    pub fn on_ia(ia: Ia, max_size: u64, mode: Mode, timeout: Duration) -> PerfResult<Side> {
        let pz = ia.create_pz().ctx("create PZ")?;
        let conn = ia
            .create_evd(8, EvdFlags::CONNECTION, None)
            .ctx("create connection EVD")?;
        let conn2 = ia
            .create_evd(8, EvdFlags::CONNECTION, None)
            .ctx("create connection EVD")?;
        let cr = ia.create_evd(16, EvdFlags::CR, None).ctx("create CR EVD")?;
        let dto = ia
            .create_evd(DTO_QLEN, EvdFlags::DTO, None)
            .ctx("create DTO EVD")?;
        fn params<'a>(pz: &'a Pz, dto: &'a Evd, c: &'a Evd) -> EpParams<'a> {
            EpParams {
                pz: Some(pz),
                recv_evd: Some(dto),
                request_evd: Some(dto),
                connect_evd: Some(c),
                ..EpParams::default()
            }
        }
        let ep = ia.create_ep(&params(&pz, &dto, &conn)).ctx("create EP")?;
        let len = usize::try_from(max_size.saturating_mul(2))
            .map_err(|_| PerfError::Unsupported("buffer too large".into()))?;
        let lmr = pz.alloc(len, MemPriv::ALL).ctx("allocate the buffer")?;
        Ok(Side {
            ia,
            pz,
            conn,
            conn2,
            cr,
            dto,
            ep,
            lmr,
            mode,
            timeout,
        })
    }

    /// A fresh EP on [`Side::conn2`] for one connection of the connection-rate test.
    ///
    /// # Errors
    /// The code of `Ia::create_ep` (`DAT_INSUFFICIENT_RESOURCES` past the IA's EP limit).
    pub fn conn_ep(&self) -> PerfResult<Ep> {
        self.ia
            .create_ep(&EpParams {
                pz: Some(&self.pz),
                recv_evd: Some(&self.dto),
                request_evd: Some(&self.dto),
                connect_evd: Some(&self.conn2),
                ..EpParams::default()
            })
            .ctx("create EP")
    }

    /// The largest message this side's buffer holds (half the buffer).
    pub fn max_size(&self) -> u64 {
        self.lmr.len() / 2
    }

    /// The most operations that may be outstanding on the data EP, as its attributes allow.
    ///
    /// # Errors
    /// The code of `Ep::query` (`DAT_INVALID_HANDLE` for a freed EP).
    pub fn max_window(&self, read: bool) -> PerfResult<u32> {
        let attr = self.ep.query().ctx("query EP")?.config.attr;
        let mut w = attr.max_request_dtos.min(attr.max_recv_dtos);
        if read {
            w = w.min(attr.max_rdma_read_out);
        }
        Ok(w.clamp(1, (DTO_QLEN / 2) as u32))
    }

    /// The next event of `evd`, by polling or waiting as [`Side::mode`] says.
    ///
    /// # Errors
    /// [`PerfError::Timeout`] after [`Side::timeout`]; [`PerfError::Dat`] with the code of
    /// `Evd::dequeue` / `Evd::wait` otherwise (`DAT_INVALID_STATE`, `DAT_ABORT`, ...).
    pub fn next_event(&self, evd: &Evd) -> PerfResult<Event> {
        match self.mode {
            Mode::Wait => {
                // Waits in slices: a provider that progresses only inside DAT calls (as the
                // test fabric does) keeps moving; an event still wakes the waiter at once.
                let deadline = Instant::now() + self.timeout;
                loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(self.timed_out());
                    }
                    match evd.wait(Timeout::from_duration(left.min(WAIT_SLICE)), 1) {
                        Ok((ev, _)) => return Ok(ev),
                        Err(e) if e == DatError::TIMEOUT_EXPIRED => {}
                        Err(e) => return Err(PerfError::dat("wait for an event", e)),
                    }
                }
            }
            Mode::Poll => {
                let mut patience = Patience::new(self.timeout);
                loop {
                    match evd.dequeue() {
                        Ok(ev) => return Ok(ev),
                        Err(e) if e == DatError::QUEUE_EMPTY => {}
                        Err(e) => return Err(PerfError::dat("dequeue an event", e)),
                    }
                    if patience.exhausted() {
                        return Err(self.timed_out());
                    }
                    std::hint::spin_loop();
                }
            }
        }
    }

    fn timed_out(&self) -> PerfError {
        PerfError::Timeout(format!(
            "no event within {:?} on IA `{}` (peer dead or stalled?)",
            self.timeout,
            self.ia.name()
        ))
    }

    /// The next DTO completion, which must be successful.
    ///
    /// # Errors
    /// As [`Side::next_event`]; [`PerfError::Protocol`] for a failed completion or an event
    /// of another stream.
    pub fn completion(&self) -> PerfResult<DtoCompletion> {
        match self.next_event(&self.dto)? {
            Event {
                data: EventData::Dto(c),
                ..
            } if c.status == dat::types::DtoStatus::Success => Ok(c),
            other => Err(PerfError::Protocol(format!("completion failed: {other:?}"))),
        }
    }

    /// Debug builds: panics unless a receive is posted on the data EP, the send/recv
    /// ping-pong's rule before each of its sends (the peer may answer at once, and on verbs a
    /// message that finds no receive is NAKed receiver-not-ready and retried after the RNR
    /// timer, or fails once `rnr_retry_count` retries are used up). Release builds, which
    /// measure, skip the query.
    pub fn debug_assert_recvs_posted(&self, when: &str) {
        if cfg!(debug_assertions)
            && let Ok(status) = self.ep.status()
        {
            assert!(status.recvs > 0, "no receive posted on the data EP {when}");
        }
    }

    /// The last DTO completion of a chunk in which it is this end's only event (the fence
    /// after one-sided traffic, which raises no event at its target): waits for as long as
    /// the connection is up, not just [`Side::timeout`], because the whole chunk happens
    /// before it and may take longer than that on a busy machine. A peer that dies or gives
    /// up (its own waits are bounded by its timeout) breaks the connection, which flushes
    /// the receive and ends the wait.
    ///
    /// # Errors
    /// As [`Side::completion`], [`PerfError::Timeout`] only once the EP is no longer
    /// connected.
    pub fn final_completion(&self) -> PerfResult<DtoCompletion> {
        loop {
            match self.completion() {
                Err(PerfError::Timeout(msg)) => {
                    let state = self.ep.query().ctx("query EP")?.state;
                    if state != EpState::Connected {
                        return Err(PerfError::Timeout(msg));
                    }
                    tracing::debug!("still waiting for the peer's fence ({msg})");
                }
                other => return other,
            }
        }
    }

    /// Waits for connection event `want` on `evd` and returns its private data.
    ///
    /// # Errors
    /// As [`Side::next_event`]; [`PerfError::Protocol`] for any other event.
    pub fn conn_event(&self, evd: &Evd, want: EventNumber) -> PerfResult<Box<[u8]>> {
        let ev = self.next_event(evd)?;
        match ev.data {
            EventData::Connection { private_data, .. } if ev.number == want => Ok(private_data),
            _ => Err(PerfError::Protocol(format!(
                "expected {want:?}, got {ev:?}"
            ))),
        }
    }

    /// Polls the byte at `offset` of the buffer until it equals `want`, driving the IA's
    /// progress between looks (an RDMA write raises no event at its target).
    ///
    /// # Errors
    /// [`PerfError::Timeout`] after [`Side::timeout`]; [`PerfError::Dat`] when the buffer
    /// cannot be read (`DAT_LENGTH_ERROR` past its end).
    pub fn poll_byte(&self, offset: usize, want: u8) -> PerfResult<()> {
        let mut patience = Patience::new(self.timeout);
        let mut b = [0u8; 1];
        loop {
            self.lmr.read(offset, &mut b).ctx("read the buffer")?;
            if b[0] == want {
                return Ok(());
            }
            if !self.ia.progress() {
                std::hint::spin_loop();
            }
            if patience.exhausted() {
                return Err(self.timed_out());
            }
        }
    }
}

/// The timeout of a polling loop, with the clock read only every 256th poll (the first read
/// starts it), not per event: under emulation (the Soft-RoCE VM) a clock read is a system
/// call, which a latency measurement must not add.
struct Patience {
    polls: u32,
    deadline: Option<Instant>,
    timeout: Duration,
}

impl Patience {
    fn new(timeout: Duration) -> Patience {
        Patience {
            polls: 0,
            deadline: None,
            timeout,
        }
    }

    /// Counts a poll that found nothing; true once the timeout has passed.
    fn exhausted(&mut self) -> bool {
        self.polls = self.polls.wrapping_add(1);
        if !self.polls.is_multiple_of(256) {
            return false;
        }
        let now = Instant::now();
        now >= *self.deadline.get_or_insert(now + self.timeout)
    }
}

/// The byte written last into a ping-pong message number `i`: never 0, and never the same for
/// two consecutive messages.
pub fn seq_byte(i: u64) -> u8 {
    (i % 255) as u8 + 1
}
