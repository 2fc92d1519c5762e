//! Who moves the bytes: the driver thread or the application.
//!
//! While an application thread keeps calling `progress` (an EVD waiter spinning, a polling
//! loop), it reads and executes incoming frames itself. A driver thread woken for the same
//! bytes would only cost a wake-up (tens of microseconds on these VMs) and contend for the
//! endpoint's lock, so when the driver is woken while the application is polling it steps
//! back: it takes the endpoint's socket out of the poller and only checks now and then
//! whether the application still polls: after [`CHECK`], then at doubling intervals up to
//! [`CHECK_MAX`] while it does (each look is a wake-up that takes a core from the polling
//! threads). When the application stops, the driver takes every socket back and executes
//! what arrived meanwhile, so one-sided operations are always served: at once when it goes
//! to sleep in an EVD wait (the facade calls `Transport::block` first, see
//! [`Shared::app_sleeps`]), within two [`CHECK_MAX`] when it just stops calling.
//!
//! A stepped-back driver counts the application as polling if it called `progress` at all
//! since the driver's previous look, not only if its last call was recent: a polling thread
//! preempted for a while (by another process, or by a driver thread's own wake-up on a 2-core
//! machine) is still polling, and taking its sockets over would make every message until the
//! next look wake the driver, cost a bare-ack `writev` and contend for the endpoint's lock.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mio::Interest;

use super::{EpConn, Pump, Shared, lock, read};

/// How soon a driver that just stepped back checks that the application still polls.
pub(crate) const CHECK: Duration = Duration::from_micros(50);
/// The longest interval between two such checks. Each check is a wake-up that preempts one
/// of the polling threads on a 2-core machine: 800 us (about 1250 wake-ups a second per IA)
/// gave way to 3.2 ms (about 310) when a look started to count calls since the previous
/// look (an application that stops polling without sleeping is then taken over within
/// 6.4 ms instead of 1 ms; one that sleeps in an EVD wait, at once).
pub(crate) const CHECK_MAX: Duration = Duration::from_micros(3200);
/// An application that called `progress` this recently is polling. Far longer than the gap
/// between two stamps of a busy poll: on a 2-core machine the driver's own wake-up preempts a
/// polling thread, and a shorter window (20 us was tried) made the driver take that thread's
/// pause for the end of its polling, serve the socket itself and contend for the endpoint's
/// lock (about 3000 wake-ups and 7000 futex calls a second in a polled ping-pong; with 200 us,
/// only the periodic checks). Once stepped back, the driver also counts calls between its
/// looks (see [`Shared::app_polling`]).
const POLLING: Duration = Duration::from_micros(200);
/// `progress` stamps the time once every this many calls (a busy poll makes one call in
/// well under a microsecond plus a `recv`, so the stamp stays far fresher than [`POLLING`]).
pub(crate) const STAMP_EVERY: u64 = 8;

impl Shared {
    /// True if an application thread is polling: it called `progress` within [`POLLING`] of
    /// `now`, or, while the driver is stepped back (`passive`: it looks at least every
    /// [`CHECK_MAX`]), at all since the driver's previous look. `seen` is the count of calls
    /// at that look (updated here at every look).
    pub(super) fn app_polling(&self, now: Instant, passive: bool, seen: &mut u64) -> bool {
        let calls = self.progress_calls.load(Ordering::Relaxed);
        let called = std::mem::replace(seen, calls) != calls;
        let last = self.last_progress.load(Ordering::Relaxed);
        let fresh = last != 0 && self.nanos(now).saturating_sub(last) < POLLING.as_nanos() as u64;
        fresh || (passive && called)
    }

    /// An application thread is about to sleep (not polling any more): the driver takes the
    /// sockets back now rather than at its next check.
    pub(crate) fn app_sleeps(&self) {
        self.last_progress.store(0, Ordering::Relaxed);
        if self.stepped_back.load(Ordering::Relaxed) {
            self.handback.store(true, Ordering::Relaxed);
            let _ = self.waker.wake();
        }
    }

    /// Takes the endpoint's socket out of the poller (unless it is still connecting). This
    /// waits for the endpoint's lock (the polling thread usually holds it): once per hand-off,
    /// not per message.
    pub(super) fn step_back(&self, ep: &EpConn) {
        let mut io = lock(&ep.io);
        if io.registered && !io.connecting {
            if let Some(s) = io.sock.as_mut() {
                let _ = self.registry.deregister(s);
            }
            io.registered = false;
        }
    }

    /// Puts every socket back into the poller and executes what arrived meanwhile.
    pub(super) fn take_over(&self, now: Instant) {
        let eps = read(&self.snapshot).clone();
        for ep in eps.iter() {
            self.with_io(ep, |sh, io| {
                if !io.registered {
                    if let Some(s) = io.sock.as_mut() {
                        let interest = Interest::READABLE | Interest::WRITABLE;
                        if sh.registry.register(s, ep.token, interest).is_err() {
                            let _ = sh.registry.reregister(s, ep.token, interest);
                        }
                    }
                    io.registered = true;
                }
                sh.pump(io, now, Pump::Serve);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, RwLock};

    use dat_core::mem::MemTable;

    use super::*;
    use crate::params::TcpParams;

    /// A polling application as the driver sees it: `calls` more `progress` calls, the last
    /// stamped at `stamp` (`None`: not stamped since it went to sleep).
    fn app(sh: &Shared, calls: u64, stamp: Option<Instant>) {
        sh.progress_calls.fetch_add(calls, Ordering::Relaxed);
        let ns = stamp.map_or(0, |t| sh.nanos(t));
        sh.last_progress.store(ns, Ordering::Relaxed);
    }

    #[test]
    fn a_stepped_back_driver_counts_calls_not_only_a_fresh_stamp() {
        let (sh, _poll) =
            Shared::new(TcpParams::default(), Arc::new(RwLock::new(MemTable::new()))).unwrap();
        let t0 = sh.epoch + Duration::from_secs(1);
        let mut seen = 0;
        // Woken by a message while the application polls: a fresh stamp says so.
        app(&sh, 10, Some(t0));
        assert!(sh.app_polling(t0 + Duration::from_micros(10), false, &mut seen));
        // Stepped back: the application was preempted past the stamp window but made calls
        // since the last look: still polling.
        app(&sh, 3, Some(t0 + Duration::from_micros(20)));
        let t1 = t0 + CHECK_MAX;
        assert!(sh.app_polling(t1, true, &mut seen));
        // No call since that look and an old stamp: it stopped.
        assert!(!sh.app_polling(t1 + CHECK_MAX, true, &mut seen));
        // Calls since the last look count only while stepped back (an event after a long
        // sleep of the driver says nothing about now).
        app(&sh, 1, Some(t0));
        assert!(!sh.app_polling(t1 + CHECK_MAX * 20, false, &mut seen));
    }
}
