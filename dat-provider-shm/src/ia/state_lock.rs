//! The lock of an IA's state: a try-first lock without poisoning or futex.
//!
//! Every post and every poll that finds work takes the state once, three times per one-way
//! message of a polled ping-pong (the poll that finds it, the receive and the send posted
//! after it). Against `std::sync::Mutex` behind the old `lock` helper this drops the poison
//! bookkeeping on each lock and release and the futex wake check: 8-byte round trip 3 841 ->
//! 3 732 instructions (`examples/rtt_count.rs` under cachegrind, BENCHMARKS "Session 7").
//! The release stays an atomic swap with `SeqCst` ordering, the same cost as std's release
//! swap on x86: like std's it orders the release before every later load of the releasing
//! thread (store-load), which the code written against std's `Mutex` may rely on (a thread
//! whose `try_lock` failed stores a flag before it, the holder reads flags after release).
//!
//! Nobody sleeps on it to be woken: a waiter spins, then yields, then sleeps for
//! [`NAP`] at a time and looks again (spin, then yield, then sleep: two threads of one core
//! must let the holder run). That suits this lock, whose holders run a pass over the rings,
//! a socket call that does not block, or at most one cross-memory copy of a request (tens of
//! microseconds for a megabyte); the application's polls only ever try it
//! ([`StateLock::try_lock`]). The one wait under it is `close`'s, up to a second for a peer
//! that may still copy into flushed buffers; callers racing a close nap meanwhile. A waiter
//! that napped sees the release at most a nap late.
//!
//! A holder that panics releases it (the guard's drop runs while unwinding); as with the
//! `lock` helper that ignored poisoning before, the state is used as the panic left it.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Spins before a waiter starts yielding its CPU.
const SPINS: u32 = 128;
/// Yields before a waiter starts napping (the holder may be a thread the scheduler will not
/// run before this one's slice is over).
const YIELDS: u32 = 64;
/// A napping waiter's sleep between looks.
const NAP: Duration = Duration::from_micros(50);

/// A lock around `T` that waiters spin, yield and nap on (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct StateLock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and at most one guard exists at a time
// (`held` is set by a successful compare-exchange with acquire ordering and cleared with a
// release store when the guard drops), so the lock hands `T` from thread to thread as a
// mutex does: `T: Send` suffices.
unsafe impl<T: Send> Sync for StateLock<T> {}

/// Access to the locked value; releases the lock when dropped.
#[derive(Debug)]
pub(crate) struct StateGuard<'a, T> {
    lock: &'a StateLock<T>,
}

impl<T> StateLock<T> {
    pub(crate) fn new(value: T) -> StateLock<T> {
        StateLock {
            held: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// The lock if it is free now.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<StateGuard<'_, T>> {
        // A guard only once the lock is taken (`then`, not `then_some`: a guard built and
        // dropped on failure would release the holder's lock).
        self.held
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then(|| StateGuard { lock: self })
    }

    /// The lock, once free: spins, then yields, then naps (see the module docs).
    #[inline]
    pub(crate) fn lock(&self) -> StateGuard<'_, T> {
        match self.try_lock() {
            Some(g) => g,
            None => self.lock_slow(),
        }
    }

    #[cold]
    fn lock_slow(&self) -> StateGuard<'_, T> {
        let mut tries = 0u32;
        loop {
            // Wait for a release with loads only, then try once.
            if !self.held.load(Ordering::Relaxed)
                && let Some(g) = self.try_lock()
            {
                return g;
            }
            tries = tries.saturating_add(1);
            if tries < SPINS {
                std::hint::spin_loop();
            } else if tries < SPINS + YIELDS {
                std::thread::yield_now();
            } else {
                std::thread::sleep(NAP);
            }
        }
    }
}

impl<T> Deref for StateGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see the `Sync` impl): nobody else reaches the
        // value until it drops.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for StateGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only reference through it.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for StateGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // A full barrier, as std's release is (see the module docs).
        self.lock.held.swap(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn one_guard_at_a_time() {
        let l = StateLock::new(0u32);
        let g = l.lock();
        assert!(l.try_lock().is_none());
        // A failed try leaves the holder's lock held.
        assert!(l.try_lock().is_none());
        drop(g);
        let mut g = l.try_lock().expect("free again");
        *g += 1;
        drop(g);
        assert_eq!(*l.lock(), 1);
    }

    #[test]
    fn threads_that_contend_lose_no_update() {
        // More threads than this machine has cores: waiters get to yield and nap while a
        // holder is descheduled.
        let l = Arc::new(StateLock::new(0u64));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut g = l.lock();
                        let v = *g;
                        std::hint::spin_loop();
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*l.lock(), 80_000);
    }

    #[test]
    fn a_holder_that_panics_releases_it() {
        let l = Arc::new(StateLock::new(5u32));
        let l2 = l.clone();
        let r = std::thread::spawn(move || {
            let mut g = l2.lock();
            *g = 6;
            panic!("holder panics");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(*l.try_lock().expect("released while unwinding"), 6);
    }
}
