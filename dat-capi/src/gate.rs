//! The gate of a handle slot: what lets a call use the slot's node without a lock.
//!
//! A slot's node may be used by any number of calls at once and is freed by `dat_*_free` (or
//! an IA's close) at any time, also while a buggy or racing consumer still calls with the
//! handle. The gate is one 64-bit word: the high half is the *tag* of what the slot holds
//! (the handle kind plus one, or 0 while the slot holds nothing), the low half counts the
//! callers inside. Every change to the word is an atomic read-modify-write:
//!
//! * a caller comes in with one `fetch_add(1, Acquire)`, which returns the tag as it was at
//!   that instant, and leaves with one `fetch_sub(1, Release)` (the drop of [`Inside`], also
//!   run when a panic unwinds), whatever the tag was;
//! * the slot's owner opens it with `fetch_or(tag, Release)` after writing the node, and
//!   closes it with `fetch_and(count, Acquire)`, then waits until the count is 0 before it
//!   takes the node out.
//!
//! Why this is as safe as the slot's `RwLock` it replaces (whose read lock was a load, a
//! compare-exchange and a poison check to come in and a `fetch_sub` with a waiter check to
//! leave):
//!
//! * A caller uses the node only if the tag its `fetch_add` returned is the kind it expects.
//!   The word's modifications are totally ordered, so that `fetch_add` is either before the
//!   owner's closing `fetch_and` (the caller is then counted when the owner looks at the
//!   count, and the owner waits for it) or after it (the caller sees tag 0, or another
//!   kind's tag after a reuse, and leaves without touching the node). No node is taken out
//!   while a caller that saw its tag is inside.
//! * Publication: the node is written before the opening `fetch_or(Release)`; a caller's
//!   `fetch_add(Acquire)` that reads the tag reads from that release sequence (every later
//!   modification is a read-modify-write), so it sees the node.
//! * Retirement: each caller's uses of the node come before its `fetch_sub(Release)`; the
//!   owner's `Acquire` load (or its closing `fetch_and`) that finds the count 0 reads a value
//!   written at or after every such `fetch_sub`, all read-modify-writes, so it synchronizes
//!   with each of them: every use happens before the node is taken out.
//! * Reuse: the closed slot goes to the allocator's free list under its mutex, and the next
//!   owner writes the new node after taking it from there; callers that come in meanwhile
//!   see tag 0 and leave.
//!
//! A caller that sees the wrong tag still counts itself in and out (its `fetch_add` cannot be
//! undone otherwise); that is harmless: it never reads the node. The count (32 bits) cannot
//! reach the tag: it is at most the number of threads inside a call at once.
//!
//! The owner waits by spinning, then yielding, then sleeping 50 µs at a time: callers inside
//! a slot only run one DTO post, dequeue or lookup, and a free racing one of those is rare,
//! so there is no futex (whose wake-up check would cost every leaving caller). The close
//! returns at the first look that finds nobody inside: callers that keep coming in with the
//! freed handle (they leave at once, but are counted while they look) delay it only while
//! they overlap without a pause, which consumers calling through libdat2 do not (most of
//! each call of theirs is spent outside the gate); in this module's stress test (two threads
//! doing nothing but come in and go out) a close takes well under a millisecond in a release
//! build.
//!
//! The gate is re-entrant: a caller inside may come into the same slot again (an RwLock read
//! could deadlock behind a queued writer). A caller inside must not close its own slot (it
//! would wait for itself), as with the lock before.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use dat_core::flag_lock::Backoff;

/// The count's half of the word.
const COUNT: u64 = u32::MAX as u64;

/// Spins before the owner's wait starts yielding.
const SPINS: u32 = 64;
/// Yields before it starts sleeping ([`dat_core::flag_lock::NAP`] before each later look).
const YIELDS: u32 = 1024;

/// A slot's gate (see the module docs).
pub struct Gate(AtomicU64);

/// A caller inside a gate; leaves when dropped.
#[must_use]
pub struct Inside<'a> {
    word: &'a AtomicU64,
    tag: u32,
}

impl Gate {
    /// A closed gate with nobody inside.
    pub const fn new() -> Gate {
        Gate(AtomicU64::new(0))
    }

    /// Comes in: counts the caller in and returns the tag the slot had at that instant (0:
    /// closed). The caller may use the node only if the tag is the one it expects, and only
    /// until the returned value is dropped.
    #[inline(always)]
    pub fn enter(&self) -> Inside<'_> {
        let s = self.0.fetch_add(1, Ordering::Acquire);
        Inside {
            word: &self.0,
            tag: (s >> 32) as u32,
        }
    }

    /// Opens the gate with `tag`, once the node it guards is written. The gate must be closed
    /// (the slot just taken from the allocator).
    pub fn open(&self, tag: NonZeroU32) {
        let prev = self
            .0
            .fetch_or(u64::from(tag.get()) << 32, Ordering::Release);
        debug_assert_eq!(prev >> 32, 0, "a handle slot opened twice");
    }

    /// Closes the gate: no caller gets in from now on, and when this returns every caller let
    /// in before has left. Returns the tag it had, `None` if it was closed already (another
    /// free won; only one close sees the tag).
    pub fn close(&self) -> Option<NonZeroU32> {
        let prev = self.0.fetch_and(COUNT, Ordering::Acquire);
        let tag = NonZeroU32::new((prev >> 32) as u32)?;
        let mut backoff = Backoff::new(SPINS, YIELDS);
        let mut count = prev & COUNT;
        while count != 0 {
            backoff.wait();
            count = self.0.load(Ordering::Acquire) & COUNT;
        }
        Some(tag)
    }

    /// Callers inside now (for tests).
    #[cfg(test)]
    fn inside(&self) -> u64 {
        self.0.load(Ordering::Relaxed) & COUNT
    }
}

impl Inside<'_> {
    /// The tag the slot had when this caller came in (0: closed).
    #[inline(always)]
    pub fn tag(&self) -> u32 {
        self.tag
    }
}

impl Drop for Inside<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.word.fetch_sub(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;
    use std::time::Duration;

    fn tag(v: u32) -> NonZeroU32 {
        NonZeroU32::new(v).unwrap()
    }

    #[test]
    fn callers_see_the_tag_of_their_instant_and_always_leave() {
        let g = Gate::new();
        assert_eq!(g.enter().tag(), 0, "closed at first");
        assert_eq!(g.inside(), 0);
        g.open(tag(3));
        {
            let a = g.enter();
            let b = g.enter(); // re-entrant
            assert_eq!((a.tag(), b.tag()), (3, 3));
            assert_eq!(g.inside(), 2);
        }
        assert_eq!(g.inside(), 0);
        assert_eq!(g.close(), Some(tag(3)));
        assert_eq!(g.close(), None, "only one close sees the tag");
        assert_eq!(g.enter().tag(), 0);
        g.open(tag(7));
        assert_eq!(g.enter().tag(), 7, "reopened with another kind");
    }

    #[test]
    fn a_panic_inside_still_leaves() {
        let g = Gate::new();
        g.open(tag(1));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _in = g.enter();
            panic!("inside");
        }));
        assert!(r.is_err());
        assert_eq!(g.inside(), 0);
        assert_eq!(g.close(), Some(tag(1)));
    }

    #[test]
    fn close_waits_for_the_callers_inside() {
        let g = Gate::new();
        g.open(tag(2));
        let left = AtomicBool::new(false);
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let inside = g.enter();
                assert_eq!(inside.tag(), 2);
                tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(100));
                left.store(true, Ordering::SeqCst);
                drop(inside);
            });
            rx.recv().unwrap();
            assert_eq!(g.close(), Some(tag(2)));
            assert!(
                left.load(Ordering::SeqCst),
                "close returned while a caller was inside"
            );
            assert_eq!(g.enter().tag(), 0, "nobody gets in after the close");
        });
    }

    #[test]
    fn racing_callers_never_see_a_closed_slot_as_open() {
        // Callers copy the guarded value only while the tag says it is there; the owner
        // clears it after each close and rewrites it before each open.
        use std::sync::atomic::AtomicU32;
        let g = Gate::new();
        let value = AtomicU32::new(0);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        let inside = g.enter();
                        if inside.tag() != 0 {
                            assert_eq!(value.load(Ordering::Relaxed), inside.tag());
                        }
                    }
                });
            }
            for round in 1..500u32 {
                let t = round % 5 + 1;
                value.store(t, Ordering::Relaxed);
                g.open(tag(t));
                std::thread::yield_now();
                assert_eq!(g.close(), Some(tag(t)));
                value.store(0, Ordering::Relaxed);
            }
            stop.store(true, Ordering::Relaxed);
        });
    }
}
