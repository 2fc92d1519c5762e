//! Event dispatchers: the core's queue rules plus blocking (the CNOs they trigger: `crate::cno`).
//!
//! A waiter first drives the transport on its own thread and spins briefly (a completion that
//! arrives within the spin window costs no sleep/wake-up), then sleeps in the transport's own
//! primitive where it has one ([`Transport::block`], ended by [`Transport::unblock`] when an
//! event arrives some other way), else on a condition variable that providers' threads signal
//! through the upcalls.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crate::cno::Cno;
use dat_core::error::Subtype;
use dat_core::evd::{
    AsyncHandle, DtoCompletion, EvdParam, EvdQueue, Event, Push, Signal, WaitStatus,
};
use dat_core::provider::Transport;
use dat_core::types::{EvdFlags, EvdId, EventNumber, Timeout};
use dat_core::{DatError, DatResult};

use crate::dyn_arc::DynArc;
use crate::ia::IaInner;
use crate::sync::lock;

/// How long a waiter drives progress and spins before it sleeps.
const SPIN: Duration = Duration::from_micros(50);

struct EvdState {
    q: EvdQueue,
    sleepers: u32,
    /// Waiters asleep in [`Transport::block`].
    blocked: u32,
    cno: Option<Cno>,
}

pub(crate) struct EvdInner {
    pub(crate) id: EvdId,
    ia: Weak<IaInner>,
    transport: DynArc<dyn Transport>,
    /// The transport's own look at this EVD's completions ([`Transport::evd_poll`]), else
    /// `None` and [`Transport::progress_evd`].
    poll: Option<crate::direct::PollOf>,
    state: Mutex<EvdState>,
    cond: Condvar,
    /// False only while a dequeue would find nothing (queue empty, no waiter, not dead), so
    /// that a poll of an empty EVD goes straight to the transport without taking the state
    /// lock. Written under the state lock: set by whatever may queue an event or register a
    /// waiter, cleared by a dequeue that leaves the queue empty.
    maybe_ready: AtomicBool,
    /// True while the EVD takes DTO completions and no CNO is attached: an idle EVD may then
    /// hand a completion to the poll driving progress (`crate::handoff`). Written under the
    /// state lock.
    handoff_ok: AtomicBool,
    /// The hand-off itself: the polling thread and what it was handed.
    handoff: crate::handoff::Handoff,
    /// False while the EVD is unwaitable (`dat_evd_set_unwaitable`): the queue's flag, read
    /// by a wait's fast path without the state lock. Written under the state lock.
    waitable: AtomicBool,
    /// DAT references: EPs, service points and the IA that use this EVD.
    pub(crate) refs: AtomicU32,
    freed: AtomicBool,
    is_async: bool,
}

impl crate::Freeable for EvdInner {
    fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }
}

impl EvdInner {
    /// Wakes the waiter, asleep on the condition variable or in the transport.
    fn wake(&self, st: &EvdState) {
        if st.sleepers > 0 {
            self.cond.notify_all();
        }
        if st.blocked > 0 {
            self.transport.unblock(self.id);
        }
    }

    /// Queues an event from a provider upcall or the core, waking a sleeping waiter and
    /// triggering the CNO as the queue decides; an overflow raises
    /// `DAT_ASYNC_ERROR_EVD_OVERFLOW` on the IA's async EVD.
    pub(crate) fn push(&self, ev: Event, signal: Signal) {
        self.push_with(|q| q.push(ev, signal));
    }

    /// [`EvdInner::push`] of a DTO completion (the queue's fast path for completions), or its
    /// hand-off to a poll of this EVD driving progress on this thread when the EVD is idle
    /// (nothing queued, no waiter, no CNO: then the event would wake nobody, trigger nothing
    /// and be the next one dequeued).
    /// The completion is what `make` builds, built once it is known where it goes (into the
    /// hand-off's slot directly: no copy through the stack).
    /// `me` is the calling thread's `handoff::thread_id`.
    #[inline]
    pub(crate) fn push_dto(&self, make: impl FnOnce() -> DtoCompletion, signal: Signal, me: usize) {
        let c = if !self.maybe_ready.load(Ordering::Acquire)
            && self.handoff_ok.load(Ordering::Acquire)
        {
            match self.handoff.offer_with(me, make) {
                Ok(()) => return,
                Err(c) => c,
            }
        } else {
            make()
        };
        self.queue_dto(c, signal);
    }

    /// The transport's look at this EVD's completions (`progress_evd`) with the EVD's poll
    /// open for a hand-off (`crate::handoff`): whether it moved anything, and the completion
    /// handed to this call, if any.
    #[inline(always)]
    fn poll_handed(&self) -> (bool, Option<DtoCompletion>) {
        self.handoff.poll(
            #[inline(always)]
            || self.progress_own(),
        )
    }

    /// [`EvdInner::poll_handed`] that shows the completion handed off to `take` where it
    /// lies (`Handoff::poll_with`).
    #[inline(always)]
    fn poll_handed_with<R>(&self, take: impl FnOnce(&DtoCompletion) -> R) -> (bool, Option<R>) {
        self.handoff.poll_with(
            #[inline(always)]
            || self.progress_own(),
            take,
        )
    }

    /// The transport's look at this EVD's completions: its own entry, else `progress_evd`.
    #[inline(always)]
    fn progress_own(&self) -> bool {
        match &self.poll {
            Some(p) => p.progress(),
            None => self.transport.progress_evd(self.id),
        }
    }

    /// Tells the transport's poller that the consumer took queued events
    /// ([`EvdPoll::active`]): a dequeue that found one queued, or a wait that returns (one
    /// satisfied at once made no look of its own; a woken one counts anyway).
    #[inline(always)]
    fn took_queued(&self) {
        if let Some(p) = &self.poll {
            p.active();
        }
    }

    /// The queued way of [`EvdInner::push_dto`] (out of line: the hand-off is the hot path).
    #[inline(never)]
    fn queue_dto(&self, c: DtoCompletion, signal: Signal) {
        self.push_with(|q| q.push_dto(c, signal));
    }

    #[inline(always)]
    fn push_with(&self, push: impl FnOnce(&mut EvdQueue) -> Push) {
        let mut st = lock(&self.state);
        self.maybe_ready.store(true, Ordering::Release);
        match push(&mut st.q) {
            Push::Queued {
                wake,
                trigger_cno: None,
            } => {
                if wake {
                    self.wake(&st);
                }
            }
            Push::Queued {
                trigger_cno: Some(_),
                ..
            } => {
                let cno = st.cno.clone();
                drop(st);
                if let Some(cno) = cno {
                    cno.inner.trigger(self.id);
                }
            }
            Push::Overflow => self.overflowed(st),
            Push::Rejected => {
                tracing::warn!(
                    evd = self.id.0,
                    "event of a stream this EVD does not accept"
                );
            }
        }
    }

    #[cold]
    fn overflowed(&self, st: MutexGuard<'_, EvdState>) {
        // A dead async EVD must wake its waiter, which then sees `WaitStatus::Dead`.
        self.wake(&st);
        drop(st);
        tracing::warn!(evd = self.id.0, "EVD overflow: event dropped");
        if !self.is_async
            && let Some(ia) = self.ia.upgrade()
        {
            ia.post_async(AsyncHandle::Evd(self.id), EventNumber::AsyncEvdOverflow, 0);
        }
    }

    /// A locked `dat_evd_dequeue` that records, for the next poll, whether it left the EVD
    /// with nothing to dequeue.
    fn dequeue_locked(&self) -> DatResult<Event> {
        let mut st = lock(&self.state);
        let r = st.q.dequeue();
        if st.q.is_empty() && !st.q.has_waiter() && !st.q.is_dead() {
            self.maybe_ready.store(false, Ordering::Release);
        }
        r
    }

    pub(crate) fn push_async(&self, ev: Event) {
        self.push(ev, Signal::Normal);
    }

    pub(crate) fn drain_where(&self, f: impl Fn(&Event) -> bool) {
        lock(&self.state).q.drain_for(f);
    }

    pub(crate) fn flags(&self) -> EvdFlags {
        lock(&self.state).q.flags()
    }
}

/// An event dispatcher (`DAT_EVD_HANDLE`).
#[derive(Clone)]
pub struct Evd {
    pub(crate) inner: Arc<EvdInner>,
}

impl fmt::Debug for Evd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Evd").field("id", &self.inner.id).finish()
    }
}

impl PartialEq for Evd {
    fn eq(&self, other: &Evd) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Evd {
    pub(crate) fn from_queue(
        ia: Weak<IaInner>,
        transport: DynArc<dyn Transport>,
        poll: Option<crate::direct::PollOf>,
        id: u32,
        q: EvdQueue,
        is_async: bool,
    ) -> Evd {
        let dto = q.flags().contains(EvdFlags::DTO);
        Evd {
            inner: Arc::new(EvdInner {
                id: EvdId(id),
                ia,
                transport,
                poll,
                state: Mutex::new(EvdState {
                    q,
                    sleepers: 0,
                    blocked: 0,
                    cno: None,
                }),
                cond: Condvar::new(),
                maybe_ready: AtomicBool::new(true),
                handoff_ok: AtomicBool::new(dto),
                handoff: crate::handoff::Handoff::new(),
                waitable: AtomicBool::new(true),
                refs: AtomicU32::new(0),
                freed: AtomicBool::new(false),
                is_async,
            }),
        }
    }

    pub(crate) fn create(
        ia: &Arc<IaInner>,
        min_qlen: i32,
        flags: EvdFlags,
        cno: Option<&Cno>,
    ) -> DatResult<Evd> {
        if let Some(c) = cno {
            c.check()?;
        }
        let pattr = &ia.provider_attr;
        let q = EvdQueue::new(min_qlen, flags, ia.ia_attr.max_evd_qlen, |f| {
            pattr.streams_may_merge(f)
        })?;
        let id = ia.next_id();
        ia.transport.create_evd(EvdId(id), flags, q.qlen())?;
        let poll = ia
            .transport
            .evd_poll(EvdId(id))
            .map(crate::direct::PollOf::new);
        let evd = Evd::from_queue(Arc::downgrade(ia), ia.transport.clone(), poll, id, q, false);
        if let Some(c) = cno {
            evd.attach_cno(Some(c.clone()));
        }
        ia.children().evds.insert(id, Arc::downgrade(&evd.inner));
        Ok(evd)
    }

    /// The id events and queries use for this EVD.
    pub fn id(&self) -> EvdId {
        self.inner.id
    }

    #[inline(always)]
    fn check(&self) -> DatResult<()> {
        if self.inner.freed.load(Ordering::Acquire) {
            return Err(DatError::invalid_handle(Subtype::NoSubtype));
        }
        Ok(())
    }

    /// Waits until at least `threshold` events are queued and dequeues one (`dat_evd_wait`).
    /// Returns the event and the number still queued (`nmore`).
    ///
    /// # Errors
    /// `DAT_TIMEOUT_EXPIRED` when `timeout` passes first; `DAT_INVALID_STATE|EVD_UNWAITABLE` on
    /// an unwaitable EVD and `DAT_INVALID_STATE` if made unwaitable while waiting;
    /// `DAT_INVALID_STATE` if another thread already waits;
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG3` for a threshold below 1 or above the queue
    /// length; `DAT_ABORT` if the EVD is freed or the IA closed while waiting.
    pub fn wait(&self, timeout: Timeout, threshold: i32) -> DatResult<(Event, u32)> {
        self.check()?;
        // A wait for one event on an idle EVD (nothing queued, no waiter, not dead: `maybe_ready`
        // clear) first looks as a dequeue does: a completion the transport finds now is handed
        // to this call (`crate::handoff`) without registering the waiter, queueing and popping
        // it, as the event a wait completing at once would return.
        // Whether this EVD's completions were looked at so (the loop's first look is then
        // not made again).
        let fast = threshold == 1
            && !self.inner.maybe_ready.load(Ordering::Acquire)
            && self.inner.waitable.load(Ordering::Acquire);
        if fast && let (_, Some(c)) = self.inner.poll_handed() {
            crate::pace::busy_poll();
            // Completions found after it were queued (which set `maybe_ready`).
            let nmore = if self.inner.maybe_ready.load(Ordering::Acquire) {
                u32::try_from(lock(&self.inner.state).q.len()).unwrap_or(u32::MAX)
            } else {
                0
            };
            return Ok((Event::dto(c), nmore));
        }
        // The deadline and the end of the spin, from the first clock read, which waits until
        // the queue and one look of the transport at this EVD's completions found nothing: a
        // wait whose event is there at once (a pipelined initiator's) reads no clock (a
        // system call where the vDSO cannot read the clock source, as under emulation).
        let mut clock: Option<(Option<Instant>, Instant)> = None;
        // Until the transport says it has no primitive of its own to sleep in.
        let mut can_block = true;
        // Whether `progress` ran since the last sleep.
        let mut progressed = false;
        let mut st = lock(&self.inner.state);
        self.inner.maybe_ready.store(true, Ordering::Release);
        st.q.begin_wait(threshold, true)?;
        loop {
            if let Some(done) = st.q.try_complete_wait(threshold) {
                st.q.end_wait();
                if st.q.is_empty() && !st.q.is_dead() {
                    // Idle again: the next wait or dequeue may take the fast path.
                    self.inner.maybe_ready.store(false, Ordering::Release);
                }
                // Out of the lock (the transport's poller is called).
                drop(st);
                self.inner.took_queued();
                return Ok(done);
            }
            let stop = match st.q.wait_status() {
                WaitStatus::Continue if self.inner.freed.load(Ordering::Acquire) => Some(
                    DatError::new(dat_core::ErrorType::Abort, Subtype::NoSubtype),
                ),
                WaitStatus::Continue => None,
                WaitStatus::Unwaitable => Some(DatError::bare(
                    dat_core::ErrorType::InvalidState,
                    Subtype::NoSubtype,
                )),
                WaitStatus::Dead => Some(DatError::invalid_state(Subtype::NoSubtype)),
            };
            if let Some(e) = stop {
                st.q.end_wait();
                return Err(e);
            }
            if clock.is_none() && !progressed && !fast {
                // The first look: this EVD's own completions, as a dequeue looks.
                drop(st);
                if self.inner.progress_own() {
                    crate::pace::busy_poll();
                }
                st = lock(&self.inner.state);
                progressed = true;
                continue;
            }
            let now = Instant::now();
            let (deadline, spin_until) =
                *clock.get_or_insert_with(|| (timeout.duration().map(|d| now + d), now + SPIN));
            if deadline.is_some_and(|d| now >= d) {
                st.q.end_wait();
                return Err(DatError::TIMEOUT_EXPIRED);
            }
            // Drive the transport on this thread while spinning, and once more before every
            // sleep, so a waiter never sleeps without having moved what was already there
            // (even if it was descheduled for the whole spin window). Never more than that:
            // with many busy endpoints `progress` nearly always moves something, and a waiter
            // that kept going while it did would never sleep.
            // A thread seen preempted while it polled shares its core: spinning would only
            // keep the CPU from the thread it waits for (see the `pace` module).
            if (now < spin_until && !crate::pace::contended()) || !progressed {
                drop(st);
                if self.inner.transport.progress() {
                    crate::pace::busy_poll();
                } else {
                    crate::pace::idle_poll();
                    std::hint::spin_loop();
                }
                st = lock(&self.inner.state);
                progressed = true;
                continue;
            }
            progressed = false;
            let slice = deadline.map_or(Duration::from_secs(3600), |d| d - now);
            // Sleep in the transport's own primitive where it has one (one wake-up: the
            // transport's); a push meanwhile ends it through `Transport::unblock`.
            // The queue is looked at again after either outcome: an event may have come while
            // the state was unlocked.
            if can_block {
                st.blocked += 1;
                drop(st);
                can_block = self.inner.transport.block(self.inner.id, slice);
                st = lock(&self.inner.state);
                st.blocked -= 1;
                continue;
            }
            st.sleepers += 1;
            // Nobody drives the transport for this sleep: it is told (`Transport::sleeping`).
            let asleep = Sleeping::begin(&*self.inner.transport);
            st = match self.inner.cond.wait_timeout(st, slice) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
            drop(asleep);
            st.sleepers -= 1;
        }
    }

    /// Dequeues one event without blocking (`dat_evd_dequeue`).
    ///
    /// # Errors
    /// [`DatError::QUEUE_EMPTY`] (bare `0x000D0000`) when nothing is queued;
    /// `DAT_INVALID_STATE` while a waiter is blocked.
    #[inline]
    pub fn dequeue(&self) -> DatResult<Event> {
        self.dequeue_with(|c| Event::dto(*c), |ev| ev)
    }

    /// [`Evd::dequeue`] that gives the event to `dto` (a DTO completion handed to this poll,
    /// shown where it lies) or to `event` (any other, or one taken off the queue) and
    /// returns what it returned: a caller that converts the event (the C ABI writes the
    /// consumer's `DAT_EVENT`) reads a handed-off completion without copies of it on the way
    /// (a `DtoCompletion` moved out of the hand-off, into an `Event` and out of the result
    /// cost ten 16-byte moves per dequeue). `dto` must not poll this EVD.
    ///
    /// # Errors
    /// As [`Evd::dequeue`].
    #[inline]
    pub fn dequeue_with<R>(
        &self,
        dto: impl FnOnce(&DtoCompletion) -> R,
        event: impl FnOnce(Event) -> R,
    ) -> DatResult<R> {
        self.check()?;
        // An EVD known to be empty (the usual case of a busy poll) is not locked until the
        // transport has made progress: a completion found there is then taken with one lock.
        if self.inner.maybe_ready.load(Ordering::Acquire) {
            match self.inner.dequeue_locked() {
                Err(e) if e == DatError::QUEUE_EMPTY => {}
                other => {
                    if other.is_ok() {
                        self.inner.took_queued();
                    }
                    crate::pace::busy_poll();
                    return other.map(event);
                }
            }
        }
        let (progressed, handed) = self.inner.poll_handed_with(dto);
        if let Some(r) = handed {
            crate::pace::busy_poll();
            return Ok(r);
        }
        if progressed {
            crate::pace::busy_poll();
            self.inner.dequeue_locked().map(event)
        } else {
            crate::pace::idle_poll();
            Err(DatError::QUEUE_EMPTY)
        }
    }

    /// Posts a software event (`dat_evd_post_se`); only the pointer value is conveyed.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG1` without `DAT_EVD_SOFTWARE_FLAG`;
    /// `DAT_QUEUE_FULL` when the queue is full.
    pub fn post_se(&self, pointer: u64) -> DatResult<()> {
        self.check()?;
        let ev = Event {
            number: EventNumber::Software,
            data: dat_core::evd::EventData::Software { pointer },
        };
        let cno = {
            let mut st = lock(&self.inner.state);
            self.inner.maybe_ready.store(true, Ordering::Release);
            match st.q.post_se(&ev)? {
                Push::Queued { wake, trigger_cno } => {
                    if wake {
                        self.inner.wake(&st);
                    }
                    trigger_cno.and(st.cno.clone())
                }
                Push::Overflow => {
                    return Err(DatError::new(
                        dat_core::ErrorType::QueueFull,
                        Subtype::NoSubtype,
                    ));
                }
                Push::Rejected => return Err(DatError::invalid_arg(1)),
            }
        };
        if let Some(c) = cno {
            c.inner.trigger(self.inner.id);
        }
        Ok(())
    }

    /// Changes the queue length (`dat_evd_resize`).
    ///
    /// # Errors
    /// `DAT_INVALID_STATE` below the number of queued events or while a waiter is blocked;
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG2` out of range.
    pub fn resize(&self, min_qlen: i32) -> DatResult<()> {
        self.check()?;
        lock(&self.inner.state).q.resize(min_qlen)
    }

    /// Enables CNO triggering (`dat_evd_enable`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE` on a freed EVD.
    pub fn enable(&self) -> DatResult<()> {
        self.check()?;
        lock(&self.inner.state).q.enable();
        Ok(())
    }

    /// Disables CNO triggering (`dat_evd_disable`); events still queue.
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE` on a freed EVD.
    pub fn disable(&self) -> DatResult<()> {
        self.check()?;
        lock(&self.inner.state).q.disable();
        Ok(())
    }

    /// Forbids waiting (`dat_evd_set_unwaitable`); a blocked waiter returns `DAT_INVALID_STATE`.
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE` on a freed EVD.
    pub fn set_unwaitable(&self) -> DatResult<()> {
        self.check()?;
        let mut st = lock(&self.inner.state);
        st.q.set_unwaitable();
        self.inner.waitable.store(false, Ordering::Release);
        self.inner.wake(&st);
        Ok(())
    }

    /// Allows waiting again (`dat_evd_clear_unwaitable`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE` on a freed EVD.
    pub fn clear_unwaitable(&self) -> DatResult<()> {
        self.check()?;
        let mut st = lock(&self.inner.state);
        st.q.clear_unwaitable();
        self.inner.waitable.store(true, Ordering::Release);
        Ok(())
    }

    fn attach_cno(&self, cno: Option<Cno>) {
        let mut st = lock(&self.inner.state);
        if let Some(old) = st.cno.take() {
            lock(&old.inner.state).detach();
        }
        if let Some(c) = &cno {
            lock(&c.inner.state).attach();
        }
        st.q.set_cno(cno.as_ref().map(|c| c.inner.id));
        self.inner.handoff_ok.store(
            cno.is_none() && st.q.flags().contains(EvdFlags::DTO),
            Ordering::Release,
        );
        st.cno = cno;
    }

    /// Attaches or detaches a CNO (`dat_evd_modify_cno`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE` on a freed EVD; `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_CNO` for a
    /// freed CNO.
    pub fn modify_cno(&self, cno: Option<&Cno>) -> DatResult<()> {
        self.check()?;
        if let Some(c) = cno {
            c.check()?;
        }
        self.attach_cno(cno.cloned());
        Ok(())
    }

    /// Parameters (`dat_evd_query`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE` on a freed EVD.
    pub fn query(&self) -> DatResult<EvdParam> {
        self.check()?;
        Ok(lock(&self.inner.state).q.param())
    }

    /// Number of queued events.
    pub fn len(&self) -> usize {
        lock(&self.inner.state).q.len()
    }

    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frees the EVD (`dat_evd_free`).
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|DAT_INVALID_STATE_EVD_IN_USE` while an EP, a service point or the IA
    /// uses it; `DAT_INVALID_HANDLE` if already freed.
    pub fn free(&self) -> DatResult<()> {
        self.check()?;
        if self.inner.is_async || self.inner.refs.load(Ordering::Acquire) > 0 {
            return Err(DatError::invalid_state(Subtype::StateEvdInUse));
        }
        self.free_unchecked();
        Ok(())
    }

    pub(crate) fn free_unchecked(&self) {
        if self.inner.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.attach_cno(None);
        {
            let st = lock(&self.inner.state);
            self.inner.wake(&st);
        }
        self.inner.transport.free_evd(self.inner.id);
    }
}

/// A sleep the transport drives no progress for (a CNO wait, an EVD wait on the condition
/// variable), as the transport knows it ([`Transport::sleeping`]): begun on creation, ended
/// on drop (every way out of the wait).
pub(crate) struct Sleeping<'a>(&'a dyn Transport);

impl<'a> Sleeping<'a> {
    pub(crate) fn begin(t: &'a dyn Transport) -> Self {
        t.sleeping(true);
        Sleeping(t)
    }
}

impl Drop for Sleeping<'_> {
    fn drop(&mut self) {
        self.0.sleeping(false);
    }
}
