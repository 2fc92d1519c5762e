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

use crate::evd::EvdInner;

thread_local! {
    /// The EVD whose poll is driving progress on this thread (null when none), and the
    /// completion handed to it.
    static SLOT: Cell<(*const EvdInner, Option<DtoCompletion>)> =
        const { Cell::new((std::ptr::null(), None)) };
}

/// Runs `progress` with `evd`'s poll open for a hand-off; returns what `progress` returned
/// and the completion handed off meanwhile, if any.
#[inline]
pub(crate) fn poll(
    evd: &EvdInner,
    progress: impl FnOnce() -> bool,
) -> (bool, Option<DtoCompletion>) {
    /// Closes the slot however `progress` ends (a panic included), so that no later upcall
    /// on this thread hands a completion to a poll that is over.
    struct Close;
    impl Drop for Close {
        fn drop(&mut self) {
            SLOT.set((std::ptr::null(), None));
        }
    }
    SLOT.set((std::ptr::from_ref(evd), None));
    let close = Close;
    let progressed = progress();
    let (_, got) = SLOT.get();
    drop(close);
    (progressed, got)
}

/// Hands `c` to the poll of `evd` running on this thread, if there is one and it has none
/// yet. The caller has checked that the EVD is idle.
#[inline]
pub(crate) fn offer(evd: &EvdInner, c: DtoCompletion) -> bool {
    let (want, got) = SLOT.get();
    if std::ptr::eq(want, evd) && got.is_none() {
        SLOT.set((want, Some(c)));
        return true;
    }
    false
}
