//! Completions: application threads poll the CQs (`ibv_poll_cq`, no system call) in
//! [`Shared::progress`] / [`Shared::progress_evd`], each work completion is matched with its
//! request by `wr_id` and delivered to the endpoint's upcalls ([`Shared::poll_cq`]); a
//! terminal fact flushes what is left ([`Shared::fail_ep`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use dat_core::flag_lock::FlagGuard;
use dat_core::provider::{CmFact, Completion};
use dat_core::types::{CompletionFlags, DtoStatus, EvdId};
use rdma_sys as sys;

use super::{CqPoll, CqSlot, LastEp, PollState, Shared, lock, read};
use crate::ep::{Ep, EpSt, Phase, SIGNAL_EVERY, WR_BIND, WR_MARK, WR_RECV, WR_SRQ};
use crate::verbs::{dto_status, wc_room};

/// One poll of an EVD in this many looks at every CQ of the IA ([`Shared::progress_cq`]).
/// What waits in another EVD's CQ is bounded by the requests outstanding on its queues (the
/// facade takes no more than the endpoints' `max_*_dtos`), not by how often it is polled;
/// the cadence only decides how soon a completion nobody dequeues for (the null CQ's) is
/// retired while a consumer busy-polls another EVD (at 20 000 dequeues a second, within
/// about 6 ms). A full look costs about 650 instructions with four CQs (`dapltest -T P`,
/// about 4.3 dequeues per operation, the empty ones included): one in 32 dequeues made it
/// about 87 instructions per operation (session 14), one in 128 about 22.
pub const OTHERS_EVERY: u32 = 128;

/// A DTO EVD's own look at its CQ (`Transport::evd_poll`): the CQ held, so that a dequeue
/// looks nothing up (the EVD-to-CQ map's read lock and hash probe, or before session 14 a
/// cache entry's lock: two atomic operations and about 40 instructions per dequeue). Freeing
/// the EVD takes the CQ out of its reach (`CqSlot::release`), so the device's CQ goes at
/// `dat_evd_free` although the facade drops the poller only with the EVD's last handle.
pub struct EvdPoller {
    pub(crate) shared: Arc<Shared>,
    /// The CQ's poll side only (see [`CqPoll`]).
    pub(crate) poll: Arc<CqPoll>,
}

impl dat_core::provider::EvdPoll for EvdPoller {
    // Inlined where the facade calls it directly (`crate::direct`).
    #[inline(always)]
    fn progress(&self) -> bool {
        self.shared.progress_cq(&self.poll)
    }

    #[inline(always)]
    fn active(&self) {
        self.shared.note_poll();
    }
}

/// Work completions taken per `ibv_poll_cq`.
const POLL_BATCH: usize = 8;

impl Shared {
    /// Polls every CQ once without blocking; true if anything was delivered.
    pub fn progress(&self) -> bool {
        self.note_poll();
        self.drain(false)
    }

    /// Counts an application thread's poll for the event thread ([`Shared::app_active`]):
    /// a look at the CQs, or the take of a completion that was queued already
    /// (`EvdPoll::active`), which a consumer taking a window of completions one at a time
    /// makes many times between two looks. A load, and a store only when the flag was clear.
    #[inline(always)]
    pub(crate) fn note_poll(&self) {
        if !self.polled.load(Ordering::Relaxed) {
            self.polled.store(true, Ordering::Relaxed);
        }
    }

    /// Polls the CQ of `evd` for a poll of that EVD (`dat_evd_dequeue`) as
    /// [`Shared::progress_cq`] does, looking the CQ up by the EVD's id; every CQ of the IA
    /// when `evd` has none. The facade calls it for EVDs without an [`EvdPoller`] only (those
    /// without a CQ). True if anything was delivered.
    pub fn progress_evd(&self, evd: EvdId) -> bool {
        match read(&self.cqs).get(&evd).cloned() {
            Some(slot) => self.progress_cq(&slot.poll),
            None => self.progress(),
        }
    }

    /// Polls `slot`, the CQ of the EVD being polled (`dat_evd_dequeue`), and every CQ of the
    /// IA on one such call in [`OTHERS_EVERY`]: a dequeue does not pay for the CQs of the
    /// IA's other EVDs (`dapltest -T P` has four), whose completions wait for their own EVD's
    /// polls, a waiter's spin ([`Shared::progress`], every CQ), the event thread, or the next
    /// full look; the null CQ (requests whose EVD is not given) is drained that way too.
    /// True if anything was delivered.
    #[inline(always)]
    pub(crate) fn progress_cq(&self, poll: &CqPoll) -> bool {
        self.note_poll();
        // A count, not exact under races (a plain load and store, no read-modify-write).
        let n = self.evd_polls.load(Ordering::Relaxed);
        self.evd_polls.store(n.wrapping_add(1), Ordering::Relaxed);
        if !n.is_multiple_of(OTHERS_EVERY) {
            // The usual dequeue: the poll inlined (one function's entry and exit instead of
            // two, and `wait` known).
            return self.poll_cq_inline(poll, false);
        }
        self.drain(false)
    }

    /// Polls `slot` until a poll returns fewer work completions than it had room for, and
    /// delivers them. With `wait` false a CQ another thread is polling is skipped.
    #[inline(never)]
    pub fn poll_cq(&self, slot: &CqSlot, wait: bool) -> bool {
        self.poll_cq_inline(&slot.poll, wait)
    }

    /// [`Shared::poll_cq`], inlined where a dequeue finds its EVD's CQ in the cache.
    #[inline(always)]
    fn poll_cq_inline(&self, poll: &CqPoll, wait: bool) -> bool {
        let mut g = if wait {
            poll.lock()
        } else {
            match poll.try_lock() {
                Some(g) => g,
                None => return false,
            }
        };
        let PollState { last, cq } = &mut *g;
        // Released (its EVD freed, or the IA closed): nothing to poll.
        let Some(cq) = cq.as_ref() else {
            return false;
        };
        let mut room = wc_room::<POLL_BATCH>();
        let mut any = false;
        loop {
            let wcs = match cq.poll(&mut room) {
                Ok(wcs) => wcs,
                Err(e) => {
                    tracing::warn!(ia = %self.name, error = %e, "ibv_poll_cq failed");
                    &[]
                }
            };
            if wcs.is_empty() {
                return any;
            }
            any = true;
            // A batch short of the room means the CQ was empty at that poll: the next poll
            // (of this caller or another) takes whatever comes after, so none is made here (a
            // ping-pong end would otherwise poll twice per completion, the second in vain).
            let more = wcs.len() == POLL_BATCH;
            for wc in wcs {
                self.handle_wc(wc, last);
            }
            if !more {
                return true;
            }
        }
    }

    /// The endpoint of QP `qpn`: the CQ's last one if `by_qpn` has not changed since it was
    /// looked up (no lock, no hash), else `by_qpn`'s, remembered in `last`
    /// ([`Shared::endpoint_lookup`], out of line).
    #[inline(always)]
    fn endpoint_of<'a>(&self, qpn: u32, last: &'a mut LastEp) -> Option<&'a Arc<Ep>> {
        // Loaded before any lookup: a change of `by_qpn` after it makes the entry stale.
        let generation = self.qpn_gen.load(Ordering::Acquire);
        if last.qpn == qpn && last.generation == generation && last.ep.is_some() {
            return last.ep.as_ref();
        }
        self.endpoint_lookup(qpn, generation, last)
    }

    /// [`Shared::endpoint_of`] when the CQ's last endpoint is not that of `qpn` or is stale:
    /// `by_qpn`'s, remembered in `last` with `generation` (loaded before this lookup).
    #[inline(never)]
    fn endpoint_lookup<'a>(
        &self,
        qpn: u32,
        generation: u64,
        last: &'a mut LastEp,
    ) -> Option<&'a Arc<Ep>> {
        let ep = read(&self.by_qpn).get(&qpn).cloned()?;
        // The endpoint it held before goes once this completion is delivered (never with
        // `by_qpn`'s lock held).
        let old = std::mem::replace(
            last,
            LastEp {
                qpn,
                generation,
                ep: Some(ep),
            },
        );
        drop(old);
        last.ep.as_ref()
    }

    /// Delivers one work completion (the caller holds the CQ's lock, which guards `last`).
    /// Inlined into the poll: its own call would cost a function's entry and exit per
    /// completion. Only the usual completion ([`usual_completion`]) is handled inline; any
    /// other goes to [`Shared::handle_other_wc`], out of line, so that the poll's code stays
    /// small and in one piece (the EVD poller 1.4 KiB instead of 4.4, BENCHMARKS.md,
    /// session 20).
    #[inline(always)]
    fn handle_wc(&self, wc: &sys::ibv_wc, last: &mut LastEp) {
        let Some(ep) = self.endpoint_of(wc.qp_num, last) else {
            gone(wc.qp_num);
            return;
        };
        let mut guard = ep.st.lock();
        if let Some(c) = usual_completion(&mut guard, wc) {
            drop(guard);
            ep.upcalls.completion(c);
            return;
        }
        self.handle_other_wc(ep, guard, wc);
    }

    /// [`Shared::handle_wc`] for every completion but the usual one, with the endpoint's
    /// lock (`guard`) held: an error or a flush, the completion of an SRQ receive, a window
    /// bind or a marker, one that retires unsignalled requests or a suppressed one, one that
    /// lets a graceful disconnect proceed.
    #[inline(never)]
    fn handle_other_wc(&self, ep: &Arc<Ep>, mut guard: FlagGuard<'_, EpSt>, wc: &sys::ibv_wc) {
        let status = dto_status(wc.status);
        // The unsignalled requests this completion retires (at most `SIGNAL_EVERY - 1`, no
        // heap allocation), delivered before `own`, the completion's own request. Most
        // completions retire nothing: the list is made only when one does (an empty
        // `SmallVec` still cost a non-inlined drop and its pushes' capacity checks, about 50
        // instructions per completion).
        let mut retired: Option<smallvec::SmallVec<[Completion; SIGNAL_EVERY as usize]>> = None;
        let mut own: Option<Completion> = None;
        // Requests posted with SUPPRESS that this completion shows successful (the unsignalled
        // ones it retires, and its own): counted, reported by one `EpUpcalls::retired` before
        // any completion (the facade would only count each out; a `Completion` built and an
        // upcall per message cost a suppressed ping-pong about 60 instructions per message).
        let mut suppressed = 0u32;
        let mut broken = false;
        let drained = {
            // One `&mut`, so that the queues, `binds` and `phase` borrow apart.
            let st = &mut *guard;
            let id = wc.wr_id;
            if id & WR_SRQ != 0 {
                let wr = st.srq.as_ref().and_then(|s| lock(&s.wrs).take(id));
                own = wr.map(|wr| wr.completion(status, wc.byte_len));
                broken = !matches!(status, DtoStatus::Success | DtoStatus::Flushed)
                    && st.phase.is_live();
            } else {
                let recv = id & WR_RECV != 0;
                let phase = st.phase;
                let q = if recv { &mut st.recvs } else { &mut st.sends };
                // The number is looked up once: its offset from the front, and its slot if it
                // is in use (retiring the requests before it leaves that slot where it is).
                let off = q.offset(id);
                let held = off.and_then(|o| q.slot_at(id, o));
                if !recv
                    && let Some(end) = off
                    && end > 0
                {
                    // An unsignalled request before this one has completed (in order).
                    q.retire_range(end, |p| {
                        if p.flags.contains(CompletionFlags::SUPPRESS) {
                            suppressed += 1;
                            return;
                        }
                        retired
                            .get_or_insert_with(smallvec::SmallVec::new)
                            .push(p.completion(DtoStatus::Success, p.len));
                    });
                }
                if id & WR_BIND != 0
                    && let Some(b) = st.binds.get_mut(&id)
                {
                    *b = Some(status);
                }
                if id & (WR_BIND | WR_MARK) != 0 {
                    broken = !matches!(status, DtoStatus::Success | DtoStatus::Flushed)
                        && phase.is_live();
                } else if let Some(i) = held {
                    match q.get_at(i) {
                        None => {}
                        Some(p) if p.reported => {
                            q.remove_at(i);
                        }
                        Some(p) if status == DtoStatus::Flushed => {
                            // The QP went to error: report it as broken unless a terminal fact
                            // is already on its way (which flushes this request with the
                            // rest). Its own completion has come: a later one must not retire
                            // it as a success, as it does an unsignalled request without one.
                            p.signaled = true;
                            match phase {
                                Phase::Done => {
                                    own = Some(p.completion(DtoStatus::Flushed, 0));
                                    q.remove_at(i);
                                }
                                Phase::Closing => {}
                                _ => broken = true,
                            }
                        }
                        Some(p) => {
                            let status =
                                if recv && wc.status == sys::ibv_wc_status::IBV_WC_LOC_QP_OP_ERR {
                                    // The core validated the scatter list (keys, bounds,
                                    // privileges), so a receive's WQE cannot be malformed: rxe
                                    // reports a message longer than the receive this way (its
                                    // copy_data fails with EINVAL, not ENOSPC), where hardware
                                    // reports LOC_LEN_ERR.
                                    DtoStatus::LocalLength
                                } else {
                                    status
                                };
                            let n = if recv || status != DtoStatus::Success {
                                wc.byte_len
                            } else {
                                p.len
                            };
                            let n = if status == DtoStatus::Success { n } else { 0 };
                            if !recv
                                && status == DtoStatus::Success
                                && p.flags.contains(CompletionFlags::SUPPRESS)
                            {
                                suppressed += 1;
                            } else {
                                own = Some(p.completion(status, n));
                            }
                            q.remove_at(i);
                            broken = status != DtoStatus::Success && phase.is_live();
                        }
                    }
                }
            }
            // A graceful disconnect waiting for the send queue to drain proceeds (decided
            // under the same lock: one lock per completion).
            let drained = !broken
                && st.graceful_by.is_some()
                && st.phase == Phase::Connected
                && !st.sends_outstanding();
            drop(guard);
            drained
        };
        if suppressed > 0 {
            ep.upcalls.retired(suppressed);
        }
        // By reference: moving the vector into an iterator would copy all of it.
        if let Some(r) = &retired {
            for c in r {
                ep.upcalls.completion(*c);
            }
        }
        if let Some(c) = own {
            ep.upcalls.completion(c);
        }
        if drained {
            self.fail_ep(ep, CmFact::Disconnected, false, true);
        }
        if broken {
            tracing::debug!(ia = %self.name, ep = ep.id.0, status = wc.status, "work completion error: connection broken");
            self.fail_ep(ep, CmFact::Broken, false, true);
        }
    }

    /// Reports the terminal fact `fact` of `ep`: moves its QP to error, delivers the
    /// successful completions already in its CQs (`drain`), flushes everything outstanding in
    /// posting order (and the requests posted meanwhile), then reports the fact. With
    /// `disconnect` the peer is told (`rdma_disconnect`). Nothing happens if a terminal fact
    /// was reported already.
    pub fn fail_ep(&self, ep: &Arc<Ep>, fact: CmFact, drain: bool, disconnect: bool) {
        let cqs = {
            let mut st = ep.st.lock();
            if matches!(st.phase, Phase::Closing | Phase::Done) {
                return;
            }
            st.phase = Phase::Closing;
            st.deadline = None;
            st.graceful_by = None;
            if let Some(cm) = &st.cm {
                if disconnect {
                    cm.disconnect();
                }
                cm.qp_to_error();
            }
            st.cqs.clone()
        };
        if drain {
            for c in &cqs {
                self.poll_cq(c, true);
            }
        }
        let mut flushed = {
            let mut st = ep.st.lock();
            st.phase = Phase::Done;
            st.flushing = true;
            st.flush_all()
        };
        tracing::debug!(ia = %self.name, ep = ep.id.0, ?fact, flushed = flushed.len(), "connection fact");
        // The flushes go before the fact, in posting order, and so do those of requests posted
        // while they are delivered (kept by `Transport::post`, not given to the QP): once the
        // facade has the fact it completes later posts as flushed itself, which must not
        // overtake a flush of this provider.
        loop {
            for c in &flushed {
                ep.upcalls.completion(*c);
            }
            let mut st = ep.st.lock();
            flushed = st.flush_all();
            if flushed.is_empty() {
                st.flushing = false;
                break;
            }
        }
        ep.upcalls.cm(fact);
    }

    /// Completes a request that never reached the hardware as flushed (a post racing a
    /// terminal fact).
    pub fn flush_now(ep: &Ep, wr: &dat_core::provider::WorkRequest) {
        ep.upcalls.completion(wr.completion(DtoStatus::Flushed, 0));
    }
}

/// The usual work completion, taken off its queue with the endpoint's lock held (`st`): the
/// success of the oldest request of its queue (nothing unsignalled before it to retire),
/// neither suppressed nor already reported, of a send, RDMA or receive of the endpoint's
/// own (not an SRQ receive, a window bind or a marker), with no graceful disconnect waiting
/// for the queue to drain. `None` leaves everything as it was, for
/// [`Shared::handle_other_wc`], which gives such a completion the same result.
#[inline(always)]
fn usual_completion(st: &mut EpSt, wc: &sys::ibv_wc) -> Option<Completion> {
    let id = wc.wr_id;
    if wc.status != sys::ibv_wc_status::IBV_WC_SUCCESS
        || id & (WR_SRQ | WR_BIND | WR_MARK) != 0
        || st.graceful_by.is_some()
    {
        return None;
    }
    let recv = id & WR_RECV != 0;
    let q = if recv { &mut st.recvs } else { &mut st.sends };
    if q.offset(id) != Some(0) {
        return None;
    }
    let i = q.slot_at(id, 0)?;
    let p = q.get_at(i)?;
    if p.reported || (!recv && p.flags.contains(CompletionFlags::SUPPRESS)) {
        return None;
    }
    let n = if recv { wc.byte_len } else { p.len };
    let c = p.completion(DtoStatus::Success, n);
    q.remove_at(i);
    Some(c)
}

/// A completion of a QP whose endpoint is gone (out of the poll's line).
#[cold]
#[inline(never)]
fn gone(qpn: u32) {
    tracing::debug!(qpn, "completion of a QP that is gone");
}
