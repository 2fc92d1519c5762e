//! Hand-off of a completion to the poll that is driving progress for it.
//!
//! A busy poll (`dat_evd_dequeue` on an empty EVD) drives the transport on its own thread,
//! which reports the completion it finds through an upcall on that same thread: queued on
//! the EVD under its lock, then taken off again under the lock by the same poll. When the
//! EVD is idle (nothing queued, no waiter, no CNO attached: its `maybe_ready` flag clear), the
//! upcall hands the first such completion straight to the poll instead, through a
//! thread-local slot, and the poll returns it: what the queue would have returned, without
//! the second lock, the push and the pop. Any other completion (a second one for the same
//! EVD, one for another EVD, or one found by another thread) is queued as before, after the
//! handed-off one, so the order of completions is kept.

use std::cell::Cell;

use dat_core::evd::DtoCompletion;

/// This thread's slots in the facade, one thread-local for all of them: in a shared library
/// every thread-local is reached through a call (a TLS descriptor's, or `__tls_get_addr`),
/// which a function makes once per thread-local it reads (where the compiler sees one access
/// come before the others), not once per crate. A completion upcall reads the thread's
/// number and the hand-off's slot; a poll opens, reads and closes the slot and counts itself
/// for the pacer.
struct Slots {
    /// The EVD whose poll is driving progress on this thread and has no completion yet (null
    /// when none).
    want: Cell<*const ()>,
    /// The completion handed to that poll.
    got: Cell<Option<DtoCompletion>>,
    /// This thread's number as `dat_core::mem::post_cache::thread_number` gives it (0 until
    /// asked): see [`thread_number`].
    thread: Cell<u64>,
    /// The pacer's counts of this thread's polls (`crate::pace`), which every dequeue reads
    /// after its hand-off's poll.
    pace: Cell<crate::pace::Fast>,
}

thread_local! {
    // No destructor: a plain thread-relative access, with no state to check.
    static SLOTS: Slots = const {
        Slots {
            want: Cell::new(std::ptr::null()),
            got: Cell::new(None),
            thread: Cell::new(0),
            pace: Cell::new(crate::pace::Fast::NEW),
        }
    };
}

/// This thread's number (never 0, never reused): the one its posts count under
/// (`post_cache::Slots::thread_number`), read through this crate's thread-local, which a
/// completion upcall reads anyway for [`offer`].
#[inline(always)]
pub(crate) fn thread_number() -> u64 {
    let s = slots();
    match s.thread.get() {
        0 => learn_thread(s),
        n => n,
    }
}

/// This thread's slots, reached without the "destroyed" check of `LocalKey::with` (which the
/// compiler kept on the dequeue's path, on the niche of the value a closure returned).
#[inline(always)]
fn slots() -> &'static Slots {
    // SAFETY: `SLOTS` is initialised by a constant and has no destructor; `Slots` is made of
    // `Cell`s (not `Sync`).
    unsafe { crate::sync::thread_ref(&SLOTS) }
}

/// The pacer's counts of this thread's polls (see [`Slots::pace`]).
#[inline(always)]
pub(crate) fn pace_fast() -> &'static Cell<crate::pace::Fast> {
    &slots().pace
}

#[cold]
fn learn_thread(s: &Slots) -> u64 {
    let n = dat_core::mem::post_cache::thread_number();
    s.thread.set(n);
    n
}

/// Runs `progress` with `evd`'s poll open for a hand-off; returns what `progress` returned
/// and the completion handed off meanwhile, if any. `evd` is only compared by address (any
/// type will do, which the tests use): callers name the type (`poll::<EvdInner>`), so that
/// a reference to an `Arc` is not taken for the EVD itself.
#[inline]
pub(crate) fn poll<E>(evd: &E, progress: impl FnOnce() -> bool) -> (bool, Option<DtoCompletion>) {
    /// Closes the poll however `progress` ends (a panic included), so that no later upcall
    /// on this thread hands a completion to a poll that is over.
    struct Close;
    impl Drop for Close {
        fn drop(&mut self) {
            let s = slots();
            s.want.set(std::ptr::null());
            s.got.set(None);
        }
    }
    let s = slots();
    s.want.set(std::ptr::from_ref(evd).cast());
    let close = Close;
    let progressed = progress();
    s.want.set(std::ptr::null());
    let got = s.got.take();
    // Closed already: the guard is only for an unwinding `progress`.
    std::mem::forget(close);
    (progressed, got)
}

/// Hands `c` to the poll of `evd` running on this thread, if there is one and it has none
/// yet (the first completion closes the poll to others). The caller has checked that the
/// EVD is idle.
#[cfg(test)]
fn offer<E>(evd: &E, c: DtoCompletion) -> bool {
    offer_with(evd, || c).is_ok()
}

/// [`offer`] of the completion `make` builds, built only once it is known where it goes:
/// straight into the slot when the poll takes it (no copy through the stack), and handed
/// back to the caller for the queue otherwise.
#[inline(always)]
pub(crate) fn offer_with<E>(
    evd: &E,
    make: impl FnOnce() -> DtoCompletion,
) -> Result<(), DtoCompletion> {
    let s = slots();
    if std::ptr::eq(s.want.get(), std::ptr::from_ref(evd).cast()) {
        s.want.set(std::ptr::null());
        s.got.set(Some(make()));
        return Ok(());
    }
    Err(make())
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

    #[test]
    fn only_the_first_completion_for_the_polled_evd_is_handed_off() {
        let (evd, other) = (1u8, 2u8);
        assert!(!offer(&evd, c(0)), "no poll running");
        let (progressed, got) = poll(&evd, || {
            assert!(!offer(&other, c(1)), "another EVD");
            assert!(offer(&evd, c(2)));
            assert!(!offer(&evd, c(3)), "the poll has one already");
            true
        });
        assert!(progressed);
        assert_eq!(got, Some(c(2)));
        assert!(!offer(&evd, c(4)), "the poll is over");
        assert_eq!(poll(&evd, || false), (false, None));
    }

    #[test]
    fn a_panicking_progress_closes_the_poll() {
        let evd = 1u8;
        let r = std::panic::catch_unwind(|| {
            poll(&evd, || {
                assert!(offer(&evd, c(1)));
                panic!("progress failed");
            })
        });
        assert!(r.is_err());
        assert!(
            !offer(&evd, c(2)),
            "no completion goes to a poll that is over"
        );
    }
}
