//! [`FlagLock`]: a lock whose waiters spin, then yield, then nap, with no poisoning and no
//! futex, for locks that a busy poll tries on every look.
//!
//! `std::sync::Mutex` behind a poison-ignoring helper pays, on each lock and release, a look at
//! the process's panic count and a wake check: measured in the shm provider's IA state lock
//! (taken three times per one-way message of a polled ping-pong: 8-byte round trip 3 841 ->
//! 3 732 instructions) and the verbs provider's CQ poll lock (taken on every look at a CQ,
//! empty ones included: about 28 instructions per look).
//!
//! The release is a plain store with `Release` ordering: everything done under the lock
//! happens before the next holder's acquire, which is all a mutex promises (std's `Mutex`
//! documents no more; its futex release is a swap only because it must learn whether to wake
//! a sleeper, and nobody sleeps on this lock). On x86 the store is a `mov` where a swap is a
//! locked instruction (about 20 cycles, 8 ns on this host, a helper call under TCG), and the
//! lock is released on every post and completion of the verbs provider and on every look of
//! the shm provider's pollers. No user relies on a release ordering the releasing thread's
//! later loads (store-load): each hand-shake of that kind has its own `SeqCst` fence or
//! read-modify-write (the shm rings' doorbells, the verbs event thread's `long_look`).
//!
//! Nobody sleeps on it to be woken: a waiter spins, then yields, then sleeps for [`NAP`] at a
//! time and looks again (two threads of one core must let the holder run), so it suits locks
//! held for short passes (a batch of completions, a pass over rings, a non-blocking socket
//! call); a waiter that napped sees the release at most a nap late. A holder that panics
//! releases it (the guard's drop runs while unwinding), and the value is used as the panic
//! left it, as with a poison-ignoring `Mutex`.
// The lock hands out its value through a guard: the `UnsafeCell` access and the `Sync`
// impl below, each with its SAFETY line.
#![allow(unsafe_code)]

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
pub const NAP: Duration = Duration::from_micros(50);

/// A lock around `T` that waiters spin, yield and nap on (see the module docs).
#[derive(Debug, Default)]
pub struct FlagLock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and at most one guard exists at a time
// (`held` is set by a successful compare-exchange with acquire ordering and cleared by a
// release store when the guard drops), so the lock hands `T` from thread to thread as a mutex
// does: `T: Send` suffices.
unsafe impl<T: Send> Sync for FlagLock<T> {}

/// Access to the locked value; releases the lock when dropped.
#[derive(Debug)]
pub struct FlagGuard<'a, T> {
    lock: &'a FlagLock<T>,
}

impl<T> FlagLock<T> {
    /// A free lock around `value`.
    pub const fn new(value: T) -> FlagLock<T> {
        FlagLock {
            held: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// The lock if it is free now.
    #[inline]
    pub fn try_lock(&self) -> Option<FlagGuard<'_, T>> {
        // A guard only once the lock is taken (`then`, not `then_some`: a guard built and
        // dropped on failure would release the holder's lock).
        self.held
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then(|| FlagGuard { lock: self })
    }

    /// The lock, once free: spins, then yields, then naps (see the module docs).
    #[inline]
    pub fn lock(&self) -> FlagGuard<'_, T> {
        match self.try_lock() {
            Some(g) => g,
            None => self.lock_slow(),
        }
    }

    #[cold]
    fn lock_slow(&self) -> FlagGuard<'_, T> {
        let mut backoff = Backoff::new(SPINS, YIELDS);
        loop {
            // Wait for a release with loads only, then try once.
            if !self.held.load(Ordering::Relaxed)
                && let Some(g) = self.try_lock()
            {
                return g;
            }
            backoff.wait();
        }
    }
}

/// The wait between two looks of a thread waiting for another's release, with nobody to
/// wake it: it spins `spins` looks, then yields for `yields` more (the holder may share this
/// thread's CPU), then sleeps [`NAP`] before each later look. [`FlagLock`]'s waiters and the
/// C ABI's handle free (which waits for the calls inside a handle) wait this way.
#[derive(Debug)]
pub struct Backoff {
    looks: u32,
    spins: u32,
    yields: u32,
}

impl Backoff {
    /// A wait that has not looked yet.
    pub const fn new(spins: u32, yields: u32) -> Backoff {
        Backoff {
            looks: 0,
            spins,
            yields,
        }
    }

    /// Waits before the next look: a spin, a yield or a nap, by how many looks came before.
    pub fn wait(&mut self) {
        self.looks = self.looks.saturating_add(1);
        if self.looks <= self.spins {
            std::hint::spin_loop();
        } else if self.looks <= self.spins.saturating_add(self.yields) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(NAP);
        }
    }
}

impl<T> Deref for FlagGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see the `Sync` impl): nobody else reaches the
        // value until it drops.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for FlagGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only reference through it.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for FlagGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // A release store, no read-modify-write (see the module docs).
        self.lock.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn one_guard_at_a_time() {
        let l = FlagLock::new(0u32);
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
        let l = Arc::new(FlagLock::new(0u64));
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
        let l = Arc::new(FlagLock::new(5u32));
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
