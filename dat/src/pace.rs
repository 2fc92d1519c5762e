//! Busy polling that gives the CPU up when it shares it.
//!
//! A thread that polls an EVD in a loop (`dat_evd_dequeue`) sees a completion soonest while it
//! has a core to itself. When it shares its core with the thread that must answer it (two
//! ranks on one core, an oversubscribed machine), pure spinning makes that thread wait for the
//! end of the poller's scheduler slice, milliseconds, for every message: a ping-pong between
//! two polling threads on one core collapsed from microseconds to about 5 ms per message.
//!
//! So the facade watches whether a polling thread is being preempted. Every [`LOOK_EVERY`]th
//! empty poll reads the clock; a gap of more than [`GAP`] since the last look means the thread
//! was off the CPU, and if the kernel also counted an involuntary context switch (not just
//! time the application spent elsewhere) the thread is *contended* for [`HOLD`]. While it is,
//! every empty poll yields the CPU (`sched_yield`: free when nobody else is ready) and
//! [`crate::Evd::wait`] sleeps without spinning first. A thread alone on its core never sees
//! such a gap and never yields, so the uncontended fast path only counts its polls. While it is
//! contended, every look also asks the count: a yield that hands the CPU over counts as an
//! involuntary switch, so a count that did not grow since the last look (and no gap) means the
//! yields found nobody else ready, and the thread stops yielding before [`HOLD`] is over.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Empty polls between two looks at the clock. An empty poll costs 0.1-0.5 us, so 32 of them
/// stay well inside [`GAP`]; fewer looks matter where reading the clock is a system call (an
/// emulated CPU, as in the Soft-RoCE VM).
const LOOK_EVERY: u32 = 32;
/// A longer time between two looks means the thread did not run meanwhile.
const GAP: Duration = Duration::from_micros(200);
/// How long a thread stays contended after it was last seen preempted.
const HOLD: Duration = Duration::from_millis(50);

/// The decision, free of clocks and system calls (tested below with made-up values).
#[derive(Clone, Copy, Debug)]
struct Pacer {
    polls: u32,
    last_look: Option<Instant>,
    switches: u64,
    until: Option<Instant>,
}

impl Pacer {
    const NEW: Pacer = Pacer {
        polls: 0,
        last_look: None,
        switches: 0,
        until: None,
    };

    /// Counts an empty poll; returns true when this one should look at the clock.
    fn count(&mut self) -> bool {
        self.polls = self.polls.wrapping_add(1);
        self.polls.is_multiple_of(LOOK_EVERY)
    }

    /// A look at `now`; `switches` gives the thread's involuntary context switches so far
    /// (asked at the first look, after a gap, and while contended).
    ///
    /// A yield that hands the CPU to another thread counts as an involuntary switch. So while
    /// the thread is contended, looks without a gap whose count did not grow mean that the
    /// yields since the last look found nobody else ready: the thread has its core to itself
    /// again and stops yielding at once, rather than at the end of [`HOLD`]. (Under
    /// emulation, as in the Soft-RoCE VM, a thread alone on its core is often seen off the
    /// CPU for a moment; it then yielded, a system call there, on every empty poll for all of
    /// [`HOLD`].)
    fn look(&mut self, now: Instant, switches: impl FnOnce() -> Option<u64>) {
        let first = self.last_look.is_none();
        let gap = self
            .last_look
            .is_some_and(|l| now.saturating_duration_since(l) > GAP);
        let was_contended = self.contended();
        self.last_look = Some(now);
        if (first || gap || was_contended)
            && let Some(n) = switches()
        {
            if gap && n > self.switches {
                self.until = Some(now + HOLD);
            } else if was_contended && !gap && n == self.switches {
                self.until = None;
            }
            self.switches = n;
        }
    }

    /// True while the thread counts as contended (as of its last look).
    fn contended(&self) -> bool {
        matches!((self.until, self.last_look), (Some(u), Some(l)) if l < u)
    }
}

thread_local! {
    static PACER: Cell<Pacer> = const { Cell::new(Pacer::NEW) };
}

/// A poll of an EVD found nothing and the transport moved nothing: yields the CPU if this
/// thread shares it (see the module notes).
pub(crate) fn idle_poll() {
    let mut p = PACER.get();
    if p.count() {
        p.look(Instant::now(), dat_sys::sched::involuntary_switches);
    }
    PACER.set(p);
    if p.contended() {
        std::thread::yield_now();
    }
}

/// True if the calling thread was recently seen preempted while polling: a waiter should
/// sleep at once rather than spin.
pub(crate) fn contended() -> bool {
    PACER.get().contended()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn looks(p: &mut Pacer, at: Instant, switches: Option<u64>) {
        for _ in 0..LOOK_EVERY - 1 {
            assert!(!p.count());
        }
        assert!(p.count());
        p.look(at, || switches);
    }

    #[test]
    fn a_thread_polling_without_gaps_never_yields() {
        let t0 = Instant::now();
        let mut p = Pacer::NEW;
        for i in 0..100u32 {
            // Looks 1 us apart; the switch count may even grow (it is not asked).
            looks(
                &mut p,
                t0 + Duration::from_micros(i.into()),
                Some(u64::from(i)),
            );
            assert!(!p.contended());
        }
    }

    /// A pacer that looked now and was seen preempted 4 ms later (contended); returns it and
    /// the time of that look.
    fn preempted() -> (Pacer, Instant) {
        let t0 = Instant::now();
        let mut p = Pacer::NEW;
        looks(&mut p, t0, Some(3));
        // Off the CPU for 4 ms, and the kernel counted a preemption meanwhile.
        let t1 = t0 + Duration::from_millis(4);
        looks(&mut p, t1, Some(4));
        assert!(p.contended());
        (p, t1)
    }

    #[test]
    fn a_gap_with_a_preemption_makes_the_thread_contended_for_a_while() {
        let (mut p, t1) = preempted();
        // Its yields found nobody ready (the count stays), but the looks are HOLD / 2 apart:
        // gaps, which prove nothing.
        looks(&mut p, t1 + HOLD / 2, Some(4));
        assert!(p.contended());
        looks(&mut p, t1 + HOLD + Duration::from_micros(1), Some(4));
        assert!(!p.contended());
    }

    #[test]
    fn a_contended_thread_whose_yields_find_nobody_ready_stops_yielding() {
        let (mut p, t1) = preempted();
        // Its yields keep handing the CPU over (another thread polls on the same core).
        let t2 = t1 + Duration::from_micros(100);
        looks(&mut p, t2, Some(9));
        assert!(p.contended());
        // Then a look without a gap and without a switch since the last one: alone again.
        let t3 = t2 + Duration::from_micros(100);
        looks(&mut p, t3, Some(9));
        assert!(!p.contended());
        // A later preemption makes it contended again.
        looks(&mut p, t3 + Duration::from_millis(4), Some(10));
        assert!(p.contended());
    }

    #[test]
    fn a_gap_the_application_spent_elsewhere_is_not_contention() {
        let t0 = Instant::now();
        let mut p = Pacer::NEW;
        looks(&mut p, t0, Some(7));
        // A gap, but no involuntary switch: the application computed between its polls.
        looks(&mut p, t0 + Duration::from_millis(3), Some(7));
        assert!(!p.contended());
        // Nor when the kernel does not say.
        looks(&mut p, t0 + Duration::from_millis(6), None);
        assert!(!p.contended());
    }
}
