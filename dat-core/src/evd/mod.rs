//! The event dispatcher (EVD): events, the bounded queue and its wait/dequeue rules
//! (reference 6.5).
//!
//! [`EvdQueue`] is pure logic. The facade keeps it behind a mutex, blocks on a condition
//! variable and asks the queue for every decision:
//!
//! * [`EvdQueue::push`] queues an event and says whether to wake the waiter and which CNO to
//!   trigger, or reports an overflow the caller turns into `DAT_ASYNC_ERROR_EVD_OVERFLOW`.
//! * `dat_evd_wait` is [`EvdQueue::begin_wait`], then a loop of
//!   [`EvdQueue::try_complete_wait`] / [`EvdQueue::wait_status`] / block, then
//!   [`EvdQueue::end_wait`] whatever the outcome (success, timeout, interrupt, error).
//! * `dat_evd_dequeue` is [`EvdQueue::dequeue`].
//!
//! # Notification rules
//!
//! An event *notifies* unless the completion flags said otherwise ([`Signal`]):
//! `UNSIGNALLED` completions are queued silently, and on an EVD in solicited mode
//! ([`NotifyMode::Solicited`], EPs whose receive flags include `SOLICITED_WAIT`) only solicited
//! completions notify. Failed DTO/RMR-bind completions always notify, as InfiniBand reports
//! errors even to a CQ armed for solicited completions only; a consumer must not sleep through
//! a broken connection. A notifying event
//!
//! * wakes the registered waiter once at least its threshold of events is queued, and
//! * triggers the attached CNO when the EVD is enabled and **no** waiter is registered (a
//!   blocked waiter takes the event; a disabled EVD queues but never triggers its CNO).
//!
//! Silent events still count towards the threshold and are returned by the next wait that
//! runs, they only do not cause the wake-up.
//!
//! # Overflow
//!
//! A full queue does not take the event ([`Push::Overflow`]). The caller posts
//! [`Event::evd_overflow`] on the IA's async EVD; an overflowing EVD itself stays usable.
//! The async EVD, recognised by its `DAT_EVD_ASYNC_FLAG`, cannot report its own overflow: like
//! OFA it is then marked dead (catastrophic), rejects all further events and every later
//! wait or dequeue on it returns `DAT_INVALID_STATE` (no subtype, as OFA). Waiters blocked on
//! it observe [`WaitStatus::Dead`]; the caller should wake them on that overflow.

mod event;

pub use event::{AsyncHandle, DtoCompletion, Event, EventData, reason};

use std::collections::VecDeque;

use bitflags::bitflags;

use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::types::{CnoId, EvdFlags, EventNumber};

/// How a completion asked to be notified, derived from its post's completion flags
/// (reference 6.4) by the layer that produces the event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// Notifies (default flags, and every non-completion event).
    Normal,
    /// `DAT_COMPLETION_UNSIGNALLED_FLAG`: queued, but wakes nobody and triggers no CNO
    /// (unless the completion failed).
    Unsignalled,
    /// A receive completion for a send the peer posted with
    /// `DAT_COMPLETION_SOLICITED_WAIT_FLAG`: notifies, also in solicited mode.
    Solicited,
}

impl Signal {
    /// The signal of a request completion (send, RDMA, bind) posted with `flags`.
    pub fn for_request(flags: crate::types::CompletionFlags) -> Signal {
        if flags.contains(crate::types::CompletionFlags::UNSIGNALLED) {
            Signal::Unsignalled
        } else {
            Signal::Normal
        }
    }

    /// The signal of a receive completion posted with `flags`; `solicited` is the solicited
    /// bit the sender set (its `SOLICITED_WAIT` flag).
    pub fn for_receive(flags: crate::types::CompletionFlags, solicited: bool) -> Signal {
        if solicited {
            Signal::Solicited
        } else {
            Signal::for_request(flags)
        }
    }
}

/// The outcome of [`EvdQueue::push`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Push {
    /// The event was queued.
    Queued {
        /// Wake the blocked waiter (its threshold is now met by a notifying event).
        wake: bool,
        /// Trigger this CNO (enabled EVD, no waiter, notifying event, CNO attached).
        trigger_cno: Option<CnoId>,
    },
    /// The queue is full (or dead): the event was **not** queued. The caller posts
    /// `DAT_ASYNC_ERROR_EVD_OVERFLOW` on the async EVD; if this queue is itself an async EVD
    /// it is now dead and there is nowhere to report to.
    Overflow,
    /// The event belongs to a stream this EVD was not created for, or its data does not
    /// match its number. Not queued; a bug in the caller, never a consumer error.
    Rejected,
}

/// What a blocked `dat_evd_wait` should do after a wake-up that did not complete it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitStatus {
    /// Keep waiting (until the timeout).
    Continue,
    /// The EVD was made unwaitable: return [`WaitStatus::error`].
    Unwaitable,
    /// The (async) EVD overflowed and is dead: return [`WaitStatus::error`].
    Dead,
}

impl WaitStatus {
    /// The error a waiter returns for this status, `None` for [`WaitStatus::Continue`]:
    /// `DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_UNWAITABLE` for an unwaitable EVD (the spec
    /// says only `DAT_INVALID_STATE`; the subtype names the cause) and bare-subtype
    /// `DAT_INVALID_STATE` for a dead one (as OFA).
    pub fn error(self) -> Option<DatError> {
        match self {
            WaitStatus::Continue => None,
            WaitStatus::Unwaitable => Some(DatError::invalid_state(Subtype::StateEvdUnwaitable)),
            WaitStatus::Dead => Some(DEAD),
        }
    }
}

/// The error of every wait or dequeue on a dead EVD (OFA: `DAT_ERROR(DAT_INVALID_STATE, 0)`).
const DEAD: DatError = DatError::new(ErrorType::InvalidState, Subtype::NoSubtype);

/// Which completions wake a waiter: the `DAT_EVD_STATE_CONFIG_*` part of the EVD state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NotifyMode {
    /// `DAT_EVD_STATE_CONFIG_NOTIFY`: every signalled completion notifies.
    Notify,
    /// `DAT_EVD_STATE_CONFIG_SOLICITED`: only solicited (and failed) completions notify.
    Solicited,
    /// `DAT_EVD_STATE_CONFIG_THRESHOLD` (default, as OFA EPs default to
    /// `EVD_THRESHOLD`): every signalled completion notifies, waits may use a threshold.
    #[default]
    Threshold,
}

bitflags! {
    /// `DAT_EVD_STATE` as `dat_evd_query` reports it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct EvdState: u32 {
        /// `DAT_EVD_STATE_ENABLED`.
        const ENABLED = 0x01;
        /// `DAT_EVD_STATE_DISABLED`.
        const DISABLED = 0x02;
        /// `DAT_EVD_STATE_WAITABLE`.
        const WAITABLE = 0x04;
        /// `DAT_EVD_STATE_UNWAITABLE`.
        const UNWAITABLE = 0x08;
        /// `DAT_EVD_STATE_CONFIG_NOTIFY`.
        const CONFIG_NOTIFY = 0x10;
        /// `DAT_EVD_STATE_CONFIG_SOLICITED`.
        const CONFIG_SOLICITED = 0x20;
        /// `DAT_EVD_STATE_CONFIG_THRESHOLD` (0x30 in the header, overlapping the two above).
        const CONFIG_THRESHOLD = 0x30;
    }
}

/// `DAT_EVD_PARAM` without the IA handle (the facade knows it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EvdParam {
    /// `evd_qlen`: the queue length (exactly the requested `min_qlen`).
    pub qlen: u32,
    /// `evd_state`: enabled/disabled, waitable/unwaitable and the notify configuration.
    pub state: EvdState,
    /// `cno_handle`: the attached CNO, if any.
    pub cno: Option<CnoId>,
    /// `evd_flags`.
    pub flags: EvdFlags,
}

/// The arguments of `dat_evd_create` the queue validates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EvdConfig {
    /// `evd_min_qlen`.
    pub min_qlen: i32,
    /// `evd_flags`.
    pub flags: EvdFlags,
    /// The IA's `max_evd_qlen` attribute.
    pub max_evd_qlen: u32,
}

/// One EVD's queue and state: bounded FIFO, single waiter, CNO link, enable/waitable flags.
#[derive(Debug)]
pub struct EvdQueue {
    queue: VecDeque<Event>,
    qlen: u32,
    max_evd_qlen: u32,
    flags: EvdFlags,
    enabled: bool,
    waitable: bool,
    dead: bool,
    /// The threshold of the registered waiter.
    waiter: Option<i32>,
    cno: Option<CnoId>,
    mode: NotifyMode,
}

/// Reserves room for `qlen` events so that pushes never allocate.
fn reserve(queue: &mut VecDeque<Event>, qlen: u32) -> DatResult<()> {
    let want = usize::try_from(qlen).map_err(|_| DatError::resources(Subtype::ResourceMemory))?;
    let additional = want.saturating_sub(queue.len());
    queue
        .try_reserve(additional)
        .map_err(|_| DatError::resources(Subtype::ResourceMemory))
}

impl EvdQueue {
    /// Validates the `dat_evd_create` arguments and builds an empty, enabled, waitable queue
    /// with room for `min_qlen` events. `merge_ok` answers whether the provider allows the
    /// streams in `flags` to share one EVD (`ProviderAttr::streams_may_merge`).
    ///
    /// # Errors
    /// Checked in this order (OFA's):
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG2`: `min_qlen <= 0`.
    /// * `DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_TEVD`: `min_qlen > max_evd_qlen`.
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG4`: `flags` empty, with bits no stream uses,
    ///   or a stream combination `merge_ok` refuses.
    /// * `DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY`: the queue cannot be allocated.
    pub fn new(
        min_qlen: i32,
        flags: EvdFlags,
        max_evd_qlen: u32,
        merge_ok: impl Fn(EvdFlags) -> bool,
    ) -> DatResult<EvdQueue> {
        let qlen = u32::try_from(min_qlen)
            .ok()
            .filter(|&q| q > 0)
            .ok_or(DatError::invalid_arg(2))?;
        if qlen > max_evd_qlen {
            return Err(DatError::resources(Subtype::ResourceTevd));
        }
        if flags.is_empty() || flags.bits() & !EvdFlags::all().bits() != 0 || !merge_ok(flags) {
            return Err(DatError::invalid_arg(4));
        }
        let mut queue = VecDeque::new();
        reserve(&mut queue, qlen)?;
        Ok(EvdQueue {
            queue,
            qlen,
            max_evd_qlen,
            flags,
            enabled: true,
            waitable: true,
            dead: false,
            waiter: None,
            cno: None,
            mode: NotifyMode::default(),
        })
    }

    /// [`EvdQueue::new`] from an [`EvdConfig`].
    ///
    /// # Errors
    /// As [`EvdQueue::new`].
    pub fn from_config(cfg: EvdConfig, merge_ok: impl Fn(EvdFlags) -> bool) -> DatResult<EvdQueue> {
        EvdQueue::new(cfg.min_qlen, cfg.flags, cfg.max_evd_qlen, merge_ok)
    }

    /// True if this EVD takes async events (`DAT_EVD_ASYNC_FLAG`): overflowing kills it.
    pub fn is_async(&self) -> bool {
        self.flags.contains(EvdFlags::ASYNC)
    }

    /// Whether `ev` notifies under `signal` and this EVD's mode (module docs).
    #[inline]
    fn notifies(&self, ev: &Event, signal: Signal) -> bool {
        if ev.is_failed_completion() {
            return true;
        }
        match signal {
            Signal::Unsignalled => false,
            Signal::Solicited => true,
            Signal::Normal => !(self.mode == NotifyMode::Solicited && ev.is_completion()),
        }
    }

    /// Queues `ev` (never allocates) and decides who to notify; see the module docs.
    #[inline]
    pub fn push(&mut self, ev: Event, signal: Signal) -> Push {
        if !ev.is_well_formed() || !self.flags.contains(ev.stream()) {
            tracing::debug!(number = ?ev.number, flags = ?self.flags, "event rejected by EVD");
            return Push::Rejected;
        }
        if self.dead {
            return Push::Overflow;
        }
        if self.queue.len() >= self.qlen as usize {
            return self.overflow();
        }
        let notifies = self.notifies(&ev, signal);
        self.enqueue(ev, notifies)
    }

    /// [`EvdQueue::push`] of a DTO completion, with the same checks in the same order and the
    /// same outcome, but without the ones an event built from a completion passes by
    /// construction (it is well formed, and its stream is `DTO`): the completion path of
    /// every post runs through here.
    #[inline]
    pub fn push_dto(&mut self, c: DtoCompletion, signal: Signal) -> Push {
        if !self.flags.contains(EvdFlags::DTO) {
            tracing::debug!(flags = ?self.flags, "DTO completion rejected by EVD");
            return Push::Rejected;
        }
        if self.dead {
            return Push::Overflow;
        }
        if self.queue.len() >= self.qlen as usize {
            return self.overflow();
        }
        // `notifies` for a DTO event: a failed completion always notifies.
        let notifies = c.status != crate::types::DtoStatus::Success
            || match signal {
                Signal::Unsignalled => false,
                Signal::Solicited => true,
                Signal::Normal => self.mode != NotifyMode::Solicited,
            };
        self.enqueue(Event::dto(c), notifies)
    }

    /// A full queue: kills an async EVD (module docs).
    #[cold]
    fn overflow(&mut self) -> Push {
        if self.is_async() {
            tracing::warn!(qlen = self.qlen, "async EVD overflowed; it is now dead");
            self.dead = true;
        }
        Push::Overflow
    }

    /// Queues an event that passed the checks of [`EvdQueue::push`] and says whom to notify.
    #[inline]
    fn enqueue(&mut self, ev: Event, notifies: bool) -> Push {
        self.queue.push_back(ev);
        match self.waiter {
            Some(threshold) => Push::Queued {
                wake: notifies && self.threshold_met(threshold),
                trigger_cno: None,
            },
            None => Push::Queued {
                wake: false,
                trigger_cno: if notifies && self.enabled {
                    self.cno
                } else {
                    None
                },
            },
        }
    }

    #[inline]
    fn threshold_met(&self, threshold: i32) -> bool {
        let t = usize::try_from(threshold.max(1)).unwrap_or(usize::MAX);
        self.queue.len() >= t
    }

    /// `dat_evd_dequeue`: takes the oldest event without blocking.
    ///
    /// # Errors
    /// * `DAT_INVALID_STATE` (no subtype): the EVD is dead (async overflow).
    /// * `DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_WAITER`: a waiter is registered.
    /// * `DAT_QUEUE_EMPTY`, bare `0x000D0000` (what `dtest -p` compares with): no event.
    #[inline]
    pub fn dequeue(&mut self) -> DatResult<Event> {
        if self.dead {
            return Err(DEAD);
        }
        if self.waiter.is_some() {
            return Err(DatError::invalid_state(Subtype::StateEvdWaiter));
        }
        self.queue.pop_front().ok_or(DatError::QUEUE_EMPTY)
    }

    /// Starts a `dat_evd_wait` for `threshold` events: validates and registers the waiter.
    /// `threshold_allowed` says whether the EPs feeding this EVD use
    /// `DAT_COMPLETION_EVD_THRESHOLD_FLAG` (only then may `threshold` exceed 1).
    ///
    /// # Errors
    /// Checked in this order:
    /// * `DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_UNWAITABLE`: the EVD is unwaitable.
    /// * `DAT_INVALID_STATE` (no subtype): the EVD is dead.
    /// * `DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_WAITER`: another waiter is registered.
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG3`: `threshold < 1` or `> qlen`, or
    ///   `threshold > 1` while `!threshold_allowed` (OFA; the spec says `DAT_INVALID_STATE`).
    pub fn begin_wait(&mut self, threshold: i32, threshold_allowed: bool) -> DatResult<()> {
        if !self.waitable {
            return Err(DatError::invalid_state(Subtype::StateEvdUnwaitable));
        }
        if self.dead {
            return Err(DEAD);
        }
        if self.waiter.is_some() {
            return Err(DatError::invalid_state(Subtype::StateEvdWaiter));
        }
        if threshold < 1 || i64::from(threshold) > i64::from(self.qlen) {
            return Err(DatError::invalid_arg(3));
        }
        if threshold > 1 && !threshold_allowed {
            return Err(DatError::invalid_arg(3));
        }
        self.waiter = Some(threshold);
        Ok(())
    }

    /// Completes the wait if at least `threshold` events are queued: pops the oldest and
    /// returns it with `nmore`, the number of events still queued. `None` while fewer are
    /// queued, or when [`EvdQueue::wait_status`] is not [`WaitStatus::Continue`]. Does not end
    /// the wait: call [`EvdQueue::end_wait`].
    pub fn try_complete_wait(&mut self, threshold: i32) -> Option<(Event, u32)> {
        if self.wait_status() != WaitStatus::Continue || !self.threshold_met(threshold) {
            return None;
        }
        let ev = self.queue.pop_front()?;
        let nmore = u32::try_from(self.queue.len()).unwrap_or(u32::MAX);
        Some((ev, nmore))
    }

    /// What a waiter that was woken without completing must do.
    pub fn wait_status(&self) -> WaitStatus {
        if self.dead {
            WaitStatus::Dead
        } else if !self.waitable {
            WaitStatus::Unwaitable
        } else {
            WaitStatus::Continue
        }
    }

    /// The waiter leaves (success, timeout, interrupt or error).
    pub fn end_wait(&mut self) {
        self.waiter = None;
    }

    /// True while a waiter is registered.
    pub fn has_waiter(&self) -> bool {
        self.waiter.is_some()
    }

    /// Number of queued events (also the `nmore` of a timed-out wait).
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True if no event is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The queue length (capacity in events).
    pub fn qlen(&self) -> u32 {
        self.qlen
    }

    /// `dat_evd_resize`: changes the queue length, keeping the queued events.
    ///
    /// # Errors
    /// Checked in this order:
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG2`: `min_qlen <= 0` or `> max_evd_qlen`.
    /// * `DAT_INVALID_STATE | DAT_INVALID_STATE_EVD_WAITER`: a waiter is registered.
    /// * `DAT_INVALID_STATE` (no subtype): more events are queued than `min_qlen`.
    /// * `DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY`: growing failed (queue unchanged).
    pub fn resize(&mut self, min_qlen: i32) -> DatResult<()> {
        let qlen = u32::try_from(min_qlen)
            .ok()
            .filter(|&q| q > 0 && q <= self.max_evd_qlen)
            .ok_or(DatError::invalid_arg(2))?;
        if self.waiter.is_some() {
            return Err(DatError::invalid_state(Subtype::StateEvdWaiter));
        }
        if self.queue.len() > qlen as usize {
            return Err(DatError::invalid_state(Subtype::NoSubtype));
        }
        reserve(&mut self.queue, qlen)?;
        self.queue.shrink_to(qlen as usize);
        self.qlen = qlen;
        Ok(())
    }

    /// `dat_evd_post_se`: queues a software event carrying `ev`'s pointer (nothing else of
    /// `ev` is conveyed). Returns what [`EvdQueue::push`] returned: a full queue yields
    /// [`Push::Overflow`], for the caller to map.
    ///
    /// # Errors
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG1`: the EVD lacks `DAT_EVD_SOFTWARE_FLAG`.
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG2`: `ev` is not a `DAT_SOFTWARE_EVENT` with
    ///   software data.
    pub fn post_se(&mut self, ev: &Event) -> DatResult<Push> {
        if !self.flags.contains(EvdFlags::SOFTWARE) {
            return Err(DatError::invalid_arg(1));
        }
        let pointer = match (ev.number, &ev.data) {
            (EventNumber::Software, EventData::Software { pointer }) => *pointer,
            _ => return Err(DatError::invalid_arg(2)),
        };
        Ok(self.push(Event::software(pointer), Signal::Normal))
    }

    /// `dat_evd_enable`: arriving events trigger the CNO again.
    pub fn enable(&mut self) {
        self.enabled = true;
    }

    /// `dat_evd_disable`: events still queue and wait/dequeue still work (OFA), but the CNO is
    /// never triggered.
    pub fn disable(&mut self) {
        self.enabled = false;
    }

    /// True unless disabled.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// `dat_evd_set_unwaitable`: later waits fail; returns true if a waiter is registered,
    /// which the caller must wake (it then sees [`WaitStatus::Unwaitable`]).
    pub fn set_unwaitable(&mut self) -> bool {
        self.waitable = false;
        self.waiter.is_some()
    }

    /// `dat_evd_clear_unwaitable`: waits are allowed again.
    pub fn clear_unwaitable(&mut self) {
        self.waitable = true;
    }

    /// True unless set unwaitable.
    pub fn is_waitable(&self) -> bool {
        self.waitable
    }

    /// True once an async EVD overflowed.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Records the attached CNO (`dat_evd_create`, `dat_evd_modify_cno`); the caller keeps
    /// the CNO's attach count.
    pub fn set_cno(&mut self, cno: Option<CnoId>) {
        self.cno = cno;
    }

    /// The attached CNO.
    pub fn cno(&self) -> Option<CnoId> {
        self.cno
    }

    /// Sets which completions notify (the EP layer sets [`NotifyMode::Solicited`] for EVDs
    /// fed by receives with `SOLICITED_WAIT`).
    pub fn set_notify_mode(&mut self, mode: NotifyMode) {
        self.mode = mode;
    }

    /// The notify mode.
    pub fn notify_mode(&self) -> NotifyMode {
        self.mode
    }

    /// `dat_evd_query`.
    pub fn param(&self) -> EvdParam {
        let mut state = if self.enabled {
            EvdState::ENABLED
        } else {
            EvdState::DISABLED
        };
        state |= if self.waitable {
            EvdState::WAITABLE
        } else {
            EvdState::UNWAITABLE
        };
        state |= match self.mode {
            NotifyMode::Notify => EvdState::CONFIG_NOTIFY,
            NotifyMode::Solicited => EvdState::CONFIG_SOLICITED,
            NotifyMode::Threshold => EvdState::CONFIG_THRESHOLD,
        };
        EvdParam {
            qlen: self.qlen,
            state,
            cno: self.cno,
            flags: self.flags,
        }
    }

    /// The stream flags the EVD was created with.
    pub fn flags(&self) -> EvdFlags {
        self.flags
    }

    /// Removes every queued event matching `f` (for example `|e| e.ep() == Some(id)` when an
    /// EP is freed or reset), keeping the order of the rest. Returns how many were removed.
    pub fn drain_for<F: Fn(&Event) -> bool>(&mut self, f: F) -> usize {
        let before = self.queue.len();
        self.queue.retain(|e| !f(e));
        before - self.queue.len()
    }
}

#[cfg(test)]
mod tests;
