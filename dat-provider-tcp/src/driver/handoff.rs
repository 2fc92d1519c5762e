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
//! [`Shared::app_sleeps`]), within [`POLLING`] plus [`CHECK_MAX`] when it just stops calling.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mio::Interest;

use super::{EpConn, Pump, Shared, lock, read};

/// How soon a driver that just stepped back checks that the application still polls.
pub(crate) const CHECK: Duration = Duration::from_micros(50);
/// The longest interval between two such checks.
pub(crate) const CHECK_MAX: Duration = Duration::from_micros(800);
/// An application that called `progress` this recently is polling. Far longer than the gap
/// between two stamps of a busy poll: on a 2-core machine the driver's own wake-up preempts a
/// polling thread, and a shorter window (20 us was tried) made the driver take that thread's
/// pause for the end of its polling, serve the socket itself and contend for the endpoint's
/// lock (about 3000 wake-ups and 7000 futex calls a second in a polled ping-pong; with 200 us,
/// only the periodic checks). An application that stops without sleeping is taken over within
/// this plus [`CHECK_MAX`].
const POLLING: Duration = Duration::from_micros(200);
/// `progress` stamps the time once every this many calls (a busy poll makes one call in
/// well under a microsecond plus a `recv`, so the stamp stays far fresher than [`POLLING`]).
pub(crate) const STAMP_EVERY: u64 = 8;

impl Shared {
    /// True if an application thread called `progress` within [`POLLING`] of `now`.
    pub(super) fn app_polling(&self, now: Instant) -> bool {
        let last = self.last_progress.load(Ordering::Relaxed);
        last != 0 && self.nanos(now).saturating_sub(last) < POLLING.as_nanos() as u64
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
