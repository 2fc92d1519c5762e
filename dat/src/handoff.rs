//! Hand-off of a completion to the poll that is driving progress for it.
//!
//! A busy poll (`dat_evd_dequeue` on an empty EVD) drives the transport on its own thread,
//! which reports the completion it finds through an upcall on that same thread: queued on
//! the EVD under its lock, then taken off again under the lock by the same poll. When the
//! EVD is idle (nothing queued, no waiter, no CNO attached: its `maybe_ready` flag clear), the
//! upcall hands the first such completion straight to the poll instead, through the EVD's
//! [`Handoff`], and the poll returns it: what the queue would have returned, without the
//! second lock, the push and the pop. Any other completion (a second one for the same EVD,
//! one for another EVD, or one found by another thread) is queued as before, after the
//! handed-off one, so the order of completions is kept.
//!
//! The hand-off names the polling thread by [`thread_id`], which a completion upcall reads
//! with one load: before, a thread-local slot did, and in a shared library every
//! thread-local is reached through a call (a TLS descriptor's), which the upcall made once
//! per completion. The thread-local left here holds the pacer's counts (`crate::pace`),
//! which a dequeue reads anyway.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicUsize, Ordering};

use dat_core::by_thread::ByThread;
use dat_core::evd::DtoCompletion;

/// An identity of the calling thread, distinct between threads alive at the same time (a
/// thread that ended may have passed it on to a new one), never 0. On x86-64 Linux it is the
/// thread pointer, the address of the thread's control block, which the block's first word
/// holds (the TLS ABI's self-pointer, glibc's and musl's alike): one load, no call.
/// Elsewhere, the address of a thread-local.
#[inline(always)]
pub(crate) fn thread_id() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        dat_core::by_thread::thread_id()
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        thread_local! {
            static ID: u8 = const { 0 };
        }
        ID.with(|b| std::ptr::from_ref(b) as usize)
    }
}

/// One EVD's hand-off: the thread whose poll is open for one, and what it was handed.
pub(crate) struct Handoff {
    /// [`thread_id`] of the thread whose poll is open, 0 when none.
    owner: AtomicUsize,
    /// The completion handed to that poll. Only the owner's thread touches it, between its
    /// claim ([`Handoff::poll`]) and its release.
    got: UnsafeCell<Option<DtoCompletion>>,
}

// SAFETY: `got` is only read or written by the thread whose id `owner` holds, and only while
// it does: `poll` claims `owner` from 0 with a compare-exchange (so at most one thread holds
// it), touches `got` and releases it to 0 only on that thread, and `offer_with` touches
// `got` only on a thread that finds its own id there. Ids are distinct between live threads,
// and a thread holds the claim only inside its `poll` (released on unwinding too), so no
// other thread, nor this one outside its poll, ever sees its id in `owner`.
unsafe impl Sync for Handoff {}

impl Handoff {
    /// A hand-off with no poll open.
    pub(crate) const fn new() -> Handoff {
        Handoff {
            owner: AtomicUsize::new(0),
            got: UnsafeCell::new(None),
        }
    }

    /// Runs `progress` with this hand-off open to the calling thread; returns what `progress`
    /// returned and the completion handed off meanwhile, if any. A hand-off another thread
    /// holds (two threads polling one EVD) is left to it: `progress` then runs without one.
    #[inline(always)]
    pub(crate) fn poll(&self, progress: impl FnOnce() -> bool) -> (bool, Option<DtoCompletion>) {
        self.poll_with(progress, |c| *c)
    }

    /// [`Handoff::poll`] that shows the completion handed off to `take` where it lies (no
    /// copy of it to the caller, which then copies it again: the dequeue writes it straight
    /// into the consumer's event) and returns what `take` returned. `take` must not poll
    /// this EVD.
    #[inline(always)]
    pub(crate) fn poll_with<R>(
        &self,
        progress: impl FnOnce() -> bool,
        take: impl FnOnce(&DtoCompletion) -> R,
    ) -> (bool, Option<R>) {
        /// Releases the hand-off however `progress` ends (a panic included), so that no
        /// later upcall hands a completion to a poll that is over.
        struct Close<'a>(&'a Handoff);
        impl Drop for Close<'_> {
            fn drop(&mut self) {
                // SAFETY: this thread holds the claim (see `Handoff`'s Sync).
                unsafe { *self.0.got.get() = None };
                self.0.owner.store(0, Ordering::Release);
            }
        }
        let me = thread_id();
        if self
            .owner
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return (progress(), None);
        }
        let close = Close(self);
        let progressed = progress();
        // SAFETY: this thread holds the claim (see `Handoff`'s Sync); `progress` is over,
        // so no upcall of this poll holds a reference to `got`, and `take` makes none (it
        // does not poll this EVD).
        let slot = unsafe { &mut *self.got.get() };
        // Looked at in place, and emptied only when full: an unconditional `take` copied
        // the whole slot (two 16-byte moves each way) on every poll, the empty ones included.
        let got = match slot {
            Some(c) => {
                let r = take(c);
                *slot = None;
                Some(r)
            }
            None => None,
        };
        self.owner.store(0, Ordering::Release);
        // Released already: the guard is only for an unwinding `progress`.
        std::mem::forget(close);
        (progressed, got)
    }

    /// Hands the completion `make` builds to the poll open on thread `me` ([`thread_id`],
    /// the caller's), if there is one and it has none yet (the first completion closes the
    /// poll to others); else hands it back for the queue. Built only once it is known where
    /// it goes. The caller has checked that the EVD is idle.
    #[inline(always)]
    pub(crate) fn offer_with(
        &self,
        me: usize,
        make: impl FnOnce() -> DtoCompletion,
    ) -> Result<(), DtoCompletion> {
        if self.owner.load(Ordering::Relaxed) == me {
            // SAFETY: `me` is the calling thread's id and it holds the claim, inside its
            // poll's `progress`, which holds no reference to `got` (see `Handoff`'s Sync).
            let got = unsafe { &mut *self.got.get() };
            if got.is_none() {
                *got = Some(make());
                return Ok(());
            }
        }
        Err(make())
    }
}

/// This thread's slot in the facade: the pacer's counts of its polls (`crate::pace`), which
/// every dequeue reads after its hand-off's poll.
struct Slots {
    pace: Cell<crate::pace::Fast>,
}

thread_local! {
    // No destructor: a plain thread-relative access, with no state to check.
    static SLOTS: Slots = const {
        Slots {
            pace: Cell::new(crate::pace::Fast::NEW),
        }
    };
    // Gives the thread's cell of `BY_THREAD` back when the thread ends, before `SLOTS` goes.
    static RELEASE: Release = const { Release };
}

/// Each thread's `SLOTS` by its thread pointer (`dat_core::by_thread`: no thread-local
/// access, which in a shared library is a call): claimed while `RELEASE` is live, released
/// by its drop.
static BY_THREAD: ByThread<Slots> = ByThread::new();

/// Releases this thread's cell of [`BY_THREAD`] (a thread-local's destructor).
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        BY_THREAD.release();
    }
}

/// The pacer's counts of this thread's polls (see [`Slots::pace`]).
#[inline(always)]
pub(crate) fn pace_fast() -> &'static Cell<crate::pace::Fast> {
    match BY_THREAD.get() {
        // SAFETY: the cell holds this thread's `SLOTS` (see `BY_THREAD`), which outlive the
        // claim (released before the thread's thread-locals go); `Slots` is made of `Cell`s
        // (not `Sync`), so the reference stays on this thread.
        Some(p) => unsafe { &(*p).pace },
        None => pace_local(),
    }
}

/// [`pace_fast`] through the thread-local (the thread's first poll, or a thread whose cell
/// another holds; out of the poll's line), which claims the thread's cell if it is free.
#[inline(never)]
fn pace_local() -> &'static Cell<crate::pace::Fast> {
    // SAFETY: `SLOTS` is initialised by a constant and has no destructor; `Slots` is made of
    // `Cell`s (not `Sync`), so the reference stays on this thread.
    let s = unsafe { crate::sync::thread_ref(&SLOTS) };
    // Not once `RELEASE` was dropped (a poll from another thread-local's destructor).
    if BY_THREAD.is_free() && RELEASE.try_with(|_| ()).is_ok() {
        BY_THREAD.claim(s);
    }
    &s.pace
}

#[cfg(test)]
mod tests {
    use dat_core::types::{Cookie, DtoOp, DtoStatus, EpId};

    use super::*;

    fn c(cookie: u64) -> DtoCompletion {
        DtoCompletion {
            ep: EpId(1),
            cookie: Cookie(cookie),
            status: DtoStatus::Success,
            transferred_length: 8,
            operation: DtoOp::Receive,
            rmr_context: 0,
        }
    }

    fn offer(h: &Handoff, cookie: u64) -> bool {
        h.offer_with(thread_id(), || c(cookie)).is_ok()
    }

    #[test]
    fn only_the_first_completion_for_the_polled_evd_is_handed_off() {
        let (evd, other) = (Handoff::new(), Handoff::new());
        assert!(!offer(&evd, 0), "no poll running");
        let (progressed, got) = evd.poll(|| {
            assert!(!offer(&other, 1), "another EVD");
            assert!(offer(&evd, 2));
            assert!(!offer(&evd, 3), "the poll has one already");
            true
        });
        assert!(progressed);
        assert_eq!(got, Some(c(2)));
        assert!(!offer(&evd, 4), "the poll is over");
        assert_eq!(evd.poll(|| false), (false, None));
    }

    #[test]
    fn another_thread_neither_hands_off_to_a_poll_nor_opens_one_while_it_is_open() {
        let evd = Handoff::new();
        let (_, got) = evd.poll(|| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    assert!(!offer(&evd, 1), "the poll is another thread's");
                    let (progressed, got) = evd.poll(|| {
                        assert!(!offer(&evd, 2), "no hand-off of its own meanwhile");
                        true
                    });
                    assert_eq!((progressed, got), (true, None));
                });
            });
            assert!(offer(&evd, 3));
            true
        });
        assert_eq!(got, Some(c(3)));
        assert_ne!(
            std::thread::scope(|s| s.spawn(thread_id).join().unwrap()),
            thread_id(),
            "live threads have distinct ids"
        );
    }

    #[test]
    fn a_poll_with_shows_the_handed_completion_in_place_and_empties_the_slot() {
        let evd = Handoff::new();
        let (progressed, cookie) = evd.poll_with(|| offer(&evd, 7), |c| c.cookie.0);
        assert_eq!((progressed, cookie), (true, Some(7)));
        let (_, none) = evd.poll_with(|| false, |c| c.cookie.0);
        assert_eq!(none, None, "nothing was handed to the next poll");
        assert_eq!(evd.poll(|| offer(&evd, 8)), (true, Some(c(8))));
    }

    #[test]
    fn a_panicking_progress_closes_the_poll() {
        let evd = Handoff::new();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            evd.poll(|| {
                assert!(offer(&evd, 1));
                panic!("progress failed");
            })
        }));
        assert!(r.is_err());
        assert!(!offer(&evd, 2), "no completion goes to a poll that is over");
        let (_, got) = evd.poll(|| offer(&evd, 3));
        assert_eq!(got, Some(c(3)), "the next poll opens afresh");
    }
}
