//! Busy polling that gives the CPU up when it shares it.
//!
//! A thread that polls an EVD in a loop (`dat_evd_dequeue`) sees a completion soonest while it
//! has a core to itself. When it shares its core with the thread that must answer it (two
//! ranks on one core, an oversubscribed machine), pure spinning makes that thread wait for the
//! end of the poller's scheduler slice, milliseconds, for every message: a ping-pong between
//! two polling threads on one core collapsed from microseconds to about 5 ms per message.
//!
//! So the facade watches whether a polling thread is being preempted *while it spins*. The
//! polls that find nothing since the last one that found work form a *stretch*. Every
//! [`LOOK_EVERY`]th empty poll of a stretch reads the clock, and so does the poll that ends a
//! [`LONG`] stretch by finding work. A gap of more than [`GAP`] between two looks of one
//! stretch means the thread was off the CPU while it spun; if the kernel also counted an
//! involuntary context switch meanwhile (not just time the application spent elsewhere), the
//! thread is *contended* for [`HOLD`]. While it is, every empty poll yields the CPU
//! (`sched_yield`: free when nobody else is ready) and [`crate::Evd::wait`] sleeps without
//! spinning first.
//!
//! Only gaps inside a stretch count. A ping-pong's stretches are short and separated by the
//! work of each message; a look every so many empty polls *across* stretches would span many
//! messages, pass [`GAP`] in normal operation and take any passing preemption (a provider
//! thread waking for a moment on a 2-core machine) for contention: the thread then yielded on
//! every empty poll for [`HOLD`], and each yield that handed the CPU over counted as a new
//! involuntary switch, renewing it (shm 8-byte polled latency 1.5 us instead of 0.3-0.5). A
//! spinner that really shares its core spins for its whole slice: a long stretch, ended by
//! the first poll after the gap finding the peer's message.
//!
//! Two pollers on one core can still collapse (issue 5, session 7): when one of them is
//! contended and the other is not, the contended one answers within microseconds and yields
//! straight back, so the other is never off its CPU for [`GAP`] and spins until a preemption
//! for every message (shm 8 B about 711 us per message instead of 1.7, in about half of the
//! runs). Late yields and contention from work found right after a switch fixed that, but kept
//! two pollers that started on one core of two there (both cache-hot, never moved apart), at
//! 1.5 or 11 us per message: not applied. [`counts`] lets a test see which it was.
//!
//! While contended, every look also asks the switch count: a yield that hands the CPU over
//! counts as an involuntary switch, so a count that did not grow since the stretch's previous
//! look (and no gap) means the yields found nobody else ready, and the thread stops yielding
//! before [`HOLD`] is over.
//!
//! A contended thread also looks every [`LOOK_EVERY`]th empty poll *across* stretches (a
//! *held look*), since a ping-pong's stretches are too short for a look of their own: without
//! these, [`HOLD`] was measured from a last look that never came again and the thread yielded
//! on every empty poll for the rest of the run (shm 8-byte polled latency 0.36-0.41 us instead
//! of 0.21 on the fast host). A held look measures no gap (only a stretch's own looks do) and
//! lets [`HOLD`] run out; it renews it when the switch count grew by [`HELD_RENEW`] since the
//! previous held look: the yields keep handing the CPU to another thread (two pollers on one
//! core). It does not end the hold early because a few yields did not switch (a yield does not
//! switch while the scheduler finds the other thread not yet eligible, and a release then
//! costs two pollers on one core a scheduler slice per message), but it does when the
//! thread's waits ended in work since the previous held look and it was never off its CPU
//! meanwhile, by a yield, a preemption or a sleep (voluntary switches count here): what
//! answered it runs on another CPU. Two pollers on one core cannot do that, since every
//! answer needs the waiting thread off the CPU. Without this release a pair on two cores that
//! was once counted contended (a preemption at the start of a `datperf` chunk, say) yielded
//! on every empty poll for `HOLD`, one system call per message: shm 8-byte polled latency
//! 0.37-0.42 us instead of 0.22-0.24 (session 9). A thread alone on its core never yields,
//! so the uncontended fast path only counts its polls.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Empty polls between two looks at the clock within a stretch. An empty poll costs 0.1-0.5
/// us, so 32 of them stay well inside [`GAP`]; fewer looks matter where reading the clock is
/// a system call (an emulated CPU, as in the Soft-RoCE VM).
const LOOK_EVERY: u32 = 32;
/// A stretch this long is a spinner's: its switch count is taken (once) and the poll that
/// ends it looks at the clock. A multiple of [`LOOK_EVERY`]; far above the empty polls of one
/// message's wait in a ping-pong, far below a scheduler slice's worth.
const LONG: u32 = 8 * LOOK_EVERY;
/// A wait of this many empty polls counts as a slice wait ([`PaceCounts::slice_waits`]).
const SLICE_WAIT: u32 = 16 * LONG;
/// A longer time between two looks of one stretch means the thread did not run meanwhile.
const GAP: Duration = Duration::from_micros(200);
/// How long a thread stays contended after it was last seen preempted.
const HOLD: Duration = Duration::from_millis(50);
/// Involuntary switches between two held looks that renew [`HOLD`]: a good share of the
/// yields in between handed the CPU over (two pollers on one core), not one passing
/// preemption (a provider thread's wake-up on a 2-core machine).
const HELD_RENEW: u64 = LOOK_EVERY as u64 / 4;

/// The part of a [`Pacer`] that every empty poll reads and writes: 12 bytes, kept in a cell
/// of its own so that an empty poll that makes no look does not copy the whole `Pacer` in
/// and out (about 50 of the 69 instructions `idle_poll` took, session 9).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fast {
    /// Empty polls in the current stretch.
    run: u32,
    /// Empty polls while contended, in any stretch.
    held: u32,
    /// [`Pacer::until`] is set (a hold may still run).
    holding: bool,
    /// [`Pacer::contended`] as of the last look.
    contended: bool,
    /// A stretch ended in work since the previous held look.
    worked: bool,
}

impl Fast {
    pub(crate) const NEW: Fast = Fast {
        run: 0,
        held: 0,
        holding: false,
        contended: false,
        worked: false,
    };

    /// Counts an empty poll; returns which look at the clock this one makes.
    #[inline]
    fn count(&mut self) -> Look {
        self.run = self.run.wrapping_add(1);
        if self.run.is_multiple_of(LOOK_EVERY) {
            return Look::Stretch;
        }
        // Only stretches too short for looks of their own count towards a held look: a long
        // stretch's own looks already decide (and a second cadence of looks there released
        // two pollers on one core whose yields did not switch for a while).
        if self.holding && self.run < LOOK_EVERY {
            self.held = self.held.wrapping_add(1);
            if self.held.is_multiple_of(LOOK_EVERY) {
                return Look::Held;
            }
        }
        Look::No
    }
}

/// The decision, free of clocks and system calls (tested below with made-up values).
#[derive(Clone, Copy, Debug)]
struct Pacer {
    /// The counts of every empty poll (its `holding` and `contended` follow `until` and
    /// `seen`: [`Pacer::settle`] sets them after every look).
    fast: Fast,
    /// The current stretch's last look at the clock.
    last_look: Option<Instant>,
    /// Involuntary switches at the current stretch's last question.
    switches: Option<u64>,
    /// The thread's last look at the clock, in any stretch: "now" for [`Pacer::contended`].
    seen: Option<Instant>,
    /// Contended until then (`None` once a look found the time past).
    until: Option<Instant>,
    /// Involuntary switches at the previous held look.
    held_switches: Option<u64>,
    /// All switches (voluntary ones too) at the previous held look.
    held_all: Option<u64>,
}

/// What an empty poll does beside counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Look {
    /// Nothing.
    No,
    /// A look within the stretch ([`Pacer::look`]).
    Stretch,
    /// A held look ([`Pacer::held_look`]).
    Held,
}

impl Pacer {
    const NEW: Pacer = Pacer {
        fast: Fast::NEW,
        last_look: None,
        switches: None,
        seen: None,
        until: None,
        held_switches: None,
        held_all: None,
    };

    /// Counts an empty poll; returns which look at the clock this one makes.
    #[cfg(test)]
    fn count(&mut self) -> Look {
        self.fast.count()
    }

    /// A held look at `now` (contended, across stretches; see the module notes); `switches`
    /// gives the thread's `(involuntary, all)` context switches so far.
    fn held_look(&mut self, now: Instant, switches: impl FnOnce() -> Option<(u64, u64)>) {
        self.seen = Some(now);
        if !self.contended() {
            // The hold ran out since the previous look: the thread was away from its polls
            // (another test, other work) for longer than HOLD. The switches counted over
            // that time say nothing about its yields now; renewing on them made a thread
            // that left while contended yield on every empty poll for HOLD after it came
            // back (tcp 8-byte send/recv in full `datperf compare` runs).
            self.settle();
            return;
        }
        let (n, all) = switches().unzip();
        if let (Some(n), Some(before)) = (n, self.held_switches)
            && n.saturating_sub(before) >= HELD_RENEW
        {
            self.until = Some(now + HOLD);
        } else if self.fast.worked && all.is_some() && all == self.held_all {
            // Its waits ended in work, yet the thread was never off its CPU since the
            // previous held look: whatever answered it runs on another CPU, and its yields
            // found nobody to hand this one to. (Two pollers on one core cannot do that:
            // each answer needs this thread off the CPU, by a yield, a preemption or a
            // sleep.) Yielding on would only add a system call per message.
            RELEASES.fetch_add(1, Ordering::Relaxed);
            self.until = None;
        }
        self.held_switches = n;
        self.held_all = all;
        self.fast.worked = false;
        self.settle();
    }

    /// Forgets a contention that is over.
    fn settle(&mut self) {
        if !self.contended() {
            self.until = None;
            self.fast.held = 0;
            self.held_switches = None;
            self.held_all = None;
            self.fast.worked = false;
        }
        self.fast.holding = self.until.is_some();
        self.fast.contended = self.contended();
    }

    /// A poll found work. Returns true when the stretch it ends was long enough for a look
    /// ([`Pacer::look`] first, then [`Pacer::end`]).
    fn ends_long(&self) -> bool {
        self.fast.run >= LONG
    }

    /// Ends the stretch: the next one starts without a look or a switch count.
    fn end(&mut self) {
        self.fast.worked = true;
        self.fast.run = 0;
        self.last_look = None;
        self.switches = None;
    }

    /// A look at `now` within the stretch; `switches` gives the thread's involuntary context
    /// switches so far, asked only once the stretch is long, after a gap, and while contended.
    fn look(&mut self, now: Instant, switches: impl FnOnce() -> Option<u64>) {
        let gap = self
            .last_look
            .is_some_and(|l| now.saturating_duration_since(l) > GAP);
        let was_contended = self.contended();
        self.last_look = Some(now);
        self.seen = Some(now);
        let baseline = self.fast.run >= LONG && self.switches.is_none();
        if (gap || was_contended || baseline)
            && let Some(n) = switches()
        {
            match self.switches {
                Some(before) if gap && n > before => {
                    if !was_contended {
                        HOLDS.fetch_add(1, Ordering::Relaxed);
                    }
                    self.until = Some(now + HOLD);
                }
                Some(before) if was_contended && !gap && n == before => {
                    RELEASES.fetch_add(1, Ordering::Relaxed);
                    self.until = None;
                }
                _ => {}
            }
            self.switches = Some(n);
        }
        self.settle();
    }

    /// True while the thread counts as contended (as of its last look).
    fn contended(&self) -> bool {
        matches!((self.until, self.seen), (Some(u), Some(s)) if s < u)
    }
}

/// What the pacing of this process did so far (see [`counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PaceCounts {
    /// Empty polls that yielded the CPU (`sched_yield`).
    pub yields: u64,
    /// Times a polling thread was found preempted while it spun and became contended.
    pub holds: u64,
    /// Times a contended thread stopped yielding before its hold ran out.
    pub releases: u64,
    /// Long stretches of empty polls (256 or more) that ended in work.
    pub long_waits: u64,
    /// Long waits of 4 096 empty polls or more: the thread spun until a preemption, a
    /// scheduler slice or a tick; one per message is the collapse of two pollers on one core.
    pub slice_waits: u64,
}

static YIELDS: AtomicU64 = AtomicU64::new(0);
static HOLDS: AtomicU64 = AtomicU64::new(0);
static RELEASES: AtomicU64 = AtomicU64::new(0);
static LONG_WAITS: AtomicU64 = AtomicU64::new(0);
static SLICE_WAITS: AtomicU64 = AtomicU64::new(0);

/// What the pacing of every thread of this process did so far: a test (or a benchmark) that
/// runs a ping-pong can tell from these whether two pollers sharing a core handed the CPU to
/// each other per message or spun through scheduler slices. Counted only on the paths that
/// already make a system call or read the clock.
pub fn counts() -> PaceCounts {
    PaceCounts {
        yields: YIELDS.load(Ordering::Relaxed),
        holds: HOLDS.load(Ordering::Relaxed),
        releases: RELEASES.load(Ordering::Relaxed),
        long_waits: LONG_WAITS.load(Ordering::Relaxed),
        slice_waits: SLICE_WAITS.load(Ordering::Relaxed),
    }
}

thread_local! {
    /// The thread's pacing; its `fast` part is stale: [`fast`] holds it.
    static PACER: Cell<Pacer> = const { Cell::new(Pacer::NEW) };
}

/// A poll of an EVD found nothing and the transport moved nothing: yields the CPU if this
/// thread shares it (see the module notes).
///
/// Inlined (the look and the yield are out of line): in a shared library a function reaches
/// a thread-local through a call (a TLS descriptor's), made once per thread-local it reads,
/// and the dequeue that runs this has made it already for the hand-off's slots, which hold
/// these counts too ([`fast`]); out of line it cost a second one per empty dequeue.
#[inline]
pub(crate) fn idle_poll() {
    let fast = fast();
    let mut f = fast.get();
    let look = f.count();
    if look != Look::No {
        f = take_look(f, look);
    }
    fast.set(f);
    if f.contended {
        give_way();
    }
}

/// An empty poll of a contended thread yields the CPU (out of line: rare on a core of its
/// own).
#[cold]
#[inline(never)]
fn give_way() {
    YIELDS.fetch_add(1, Ordering::Relaxed);
    std::thread::yield_now();
}

/// This thread's [`Fast`] counts: a slot of the facade's one thread-local
/// (`handoff::pace_fast`), which the dequeue that counts a poll has reached already for its
/// hand-off (one TLS descriptor call per dequeue instead of one per thread-local).
#[inline(always)]
fn fast() -> &'static Cell<Fast> {
    crate::handoff::pace_fast()
}

/// The look of an empty poll at the clock (out of line: one poll in 32 at most).
#[inline(never)]
fn take_look(f: Fast, look: Look) -> Fast {
    let mut p = PACER.get();
    p.fast = f;
    match look {
        Look::No => {}
        Look::Stretch => p.look(Instant::now(), dat_sys::sched::involuntary_switches),
        Look::Held => p.held_look(Instant::now(), dat_sys::sched::switches),
    }
    PACER.set(p);
    p.fast
}

/// A poll found an event or the transport moved something: ends the stretch of empty polls
/// (looking at the clock first if it was a spinner's).
#[inline]
pub(crate) fn busy_poll() {
    let fast = fast();
    let mut f = fast.get();
    // No empty poll since the last one that found work (a stretch of 2^32 empty polls that
    // wrapped to 0 is not ended either: harmless).
    if f.run == 0 {
        return;
    }
    // A stretch too short for a look of its own (a message's wait on a core of its own)
    // left the rest of the pacer as the previous stretch's end did (no look, no switch
    // count): ending it is a reset of the counts, without the whole pacer's thread-local.
    if f.run < LOOK_EVERY {
        f.run = 0;
        f.worked = true;
        fast.set(f);
        return;
    }
    end_stretch();
}

/// [`busy_poll`] after empty polls (out of line: most polls that find an event come right
/// after another).
#[inline(never)]
fn end_stretch() {
    let mut p = PACER.get();
    p.fast = fast().get();
    if p.ends_long() {
        LONG_WAITS.fetch_add(1, Ordering::Relaxed);
        if p.fast.run >= SLICE_WAIT {
            SLICE_WAITS.fetch_add(1, Ordering::Relaxed);
        }
        p.look(Instant::now(), dat_sys::sched::involuntary_switches);
    }
    p.end();
    PACER.set(p);
    fast().set(p.fast);
}

/// True if the calling thread was recently seen preempted while polling: a waiter should
/// sleep at once rather than spin.
pub(crate) fn contended() -> bool {
    fast().get().contended
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `LOOK_EVERY` empty polls, the last one looking at `at`.
    fn looks(p: &mut Pacer, at: Instant, switches: Option<u64>) {
        for _ in 0..LOOK_EVERY - 1 {
            assert_ne!(p.count(), Look::Stretch);
        }
        assert_eq!(p.count(), Look::Stretch);
        p.look(at, || switches);
    }

    /// A stretch of `LONG` empty polls 1 us apart from `t0` (switch count `n`); returns the
    /// time of its last look.
    fn spin(p: &mut Pacer, t0: Instant, n: u64) -> Instant {
        let mut t = t0;
        for i in 0..LONG / LOOK_EVERY {
            t = t0 + Duration::from_micros(u64::from(i));
            looks(p, t, Some(n));
        }
        t
    }

    /// The poll that finds work at `at` (switch count `n`).
    fn found(p: &mut Pacer, at: Instant, n: u64) {
        if p.fast.run != 0 {
            if p.ends_long() {
                p.look(at, || Some(n));
            }
            p.end();
        }
    }

    /// The thread's polls as a dequeue makes them: `empty` empty ones, then one that finds
    /// work; returns the pacer as it then is (its counts from the thread's cell).
    fn stretch_of(empty: u32) -> Pacer {
        for _ in 0..empty {
            idle_poll();
        }
        busy_poll();
        let mut p = PACER.get();
        p.fast = fast().get();
        p
    }

    #[test]
    fn a_stretch_ends_with_the_pacer_as_a_new_one_starts() {
        // Run on a thread of its own: the pacer is per thread.
        std::thread::spawn(|| {
            // Short (no look of its own): only the counts are reset.
            let p = stretch_of(LOOK_EVERY - 1);
            assert_eq!(p.fast.run, 0);
            assert!(p.fast.worked);
            assert!(p.last_look.is_none() && p.switches.is_none());
            // With looks (at the 32nd and 64th empty poll): the stretch's end forgets them,
            // so the next stretch measures no gap from them.
            let p = stretch_of(2 * LOOK_EVERY + 5);
            assert_eq!(p.fast.run, 0);
            assert!(p.fast.worked);
            assert!(p.last_look.is_none() && p.switches.is_none());
            assert!(p.seen.is_some(), "the looks were made");
            // Long (a switch count taken, and a look at its end).
            let p = stretch_of(LONG + 1);
            assert_eq!(p.fast.run, 0);
            assert!(p.last_look.is_none() && p.switches.is_none());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_polling_without_gaps_never_yields() {
        let t0 = Instant::now();
        let mut p = Pacer::NEW;
        let t = spin(&mut p, t0, 3);
        // The switch count may even grow: no gap, no contention.
        looks(&mut p, t + Duration::from_micros(1), Some(9));
        assert!(!p.contended());
        found(&mut p, t + Duration::from_micros(2), 10);
        assert!(!p.contended());
    }

    #[test]
    fn a_spinner_preempted_until_its_peer_answered_is_contended_for_a_while() {
        let t0 = Instant::now();
        let mut p = Pacer::NEW;
        let t = spin(&mut p, t0, 3);
        // Off the CPU for 4 ms (the peer's slice), preempted; the first poll back finds the
        // peer's message.
        let t1 = t + Duration::from_millis(4);
        found(&mut p, t1, 4);
        assert!(p.contended());
        // A new stretch (it yields now): its first look only takes the switch count.
        looks(&mut p, t1 + Duration::from_micros(10), Some(5));
        assert!(p.contended());
        // Past HOLD, a look finds it no longer contended.
        p.end();
        looks(&mut p, t1 + HOLD + Duration::from_micros(1), Some(5));
        assert!(!p.contended());
    }

    /// A ping-pong after a preemption: `messages` of three empty polls each, 1 us apart, never
    /// a stretch look's worth; the switch count grows by `grow` at every held look. Returns
    /// the time of the last poll.
    fn ping_pong(p: &mut Pacer, from: Instant, messages: u32, grow: u64) -> Instant {
        ping_pong_sleeping(p, from, messages, grow, 0)
    }

    /// As [`ping_pong`], the thread also blocking `sleeps` times between held looks
    /// (voluntary switches).
    fn ping_pong_sleeping(
        p: &mut Pacer,
        from: Instant,
        messages: u32,
        grow: u64,
        sleeps: u64,
    ) -> Instant {
        let (mut now, mut n, mut all) = (from, 4, 10);
        for _ in 0..messages {
            for _ in 0..3 {
                now += Duration::from_micros(1);
                match p.count() {
                    Look::No => {}
                    Look::Stretch => panic!("a look within a stretch of three"),
                    Look::Held => {
                        n += grow;
                        all += grow + sleeps;
                        p.held_look(now, || Some((n, all)));
                    }
                }
            }
            found(p, now, n);
        }
        now
    }

    #[test]
    fn a_contended_thread_answered_from_another_cpu_stops_yielding_within_two_held_looks() {
        // Its yields find nobody ready and it is never off its CPU, yet its waits end in
        // work: the peer runs elsewhere (two cores: session 9's 0.37 us mode).
        let mut p = Pacer::NEW;
        let t1 = preempted(&mut p);
        assert!(
            p.fast.contended && p.fast.holding,
            "what every empty poll reads"
        );
        let per_look = LOOK_EVERY / 3 + 1;
        ping_pong(&mut p, t1, 2 * per_look + 1, 0);
        assert!(!p.contended());
        assert!(!p.fast.contended && !p.fast.holding);
        // Uncontended, short stretches make no look at all.
        let end = ping_pong(&mut p, t1, 1000, 0);
        assert!(!p.contended());
        assert!(end < t1 + HOLD);
    }

    #[test]
    fn a_contended_thread_that_blocks_between_answers_keeps_its_hold() {
        // Off its CPU by sleeping (or a nap of the transport) while its answers came: the
        // peer may share the CPU, so the hold stands until HOLD.
        let mut p = Pacer::NEW;
        let t1 = preempted(&mut p);
        let end = ping_pong_sleeping(&mut p, t1, 1000, 0, 1);
        assert!(end < t1 + HOLD);
        assert!(p.contended());
        // One involuntary switch per held look (below HELD_RENEW) keeps it too.
        let mut p = Pacer::NEW;
        let t1 = preempted(&mut p);
        ping_pong(&mut p, t1, 1000, 1);
        assert!(p.contended());
    }

    /// A spinner preempted for 4 ms: contended from the returned time.
    fn preempted(p: &mut Pacer) -> Instant {
        let t = spin(p, Instant::now(), 3);
        let t1 = t + Duration::from_millis(4);
        found(p, t1, 4);
        assert!(p.contended());
        t1
    }

    #[test]
    fn a_contended_ping_pong_stops_yielding_after_hold() {
        // Its yields find nobody ready, or a passing preemption now and then.
        for grow in [0, 1] {
            let mut p = Pacer::NEW;
            let t1 = preempted(&mut p);
            let end = ping_pong(&mut p, t1, 20_000, grow);
            assert!(end > t1 + HOLD);
            assert!(!p.contended(), "switches grown by {grow} per held look");
            // Uncontended again, short stretches make no look at all.
            ping_pong(&mut p, end, 1000, grow);
            assert!(!p.contended());
        }
    }

    #[test]
    fn two_pollers_on_one_core_stay_contended_past_hold() {
        let mut p = Pacer::NEW;
        let t1 = preempted(&mut p);
        // The held looks find that the yields handed the CPU over.
        let end = ping_pong(&mut p, t1, 40_000, HELD_RENEW);
        assert!(end > t1 + 2 * HOLD);
        assert!(p.contended());
    }

    #[test]
    fn a_thread_back_after_hold_does_not_renew_on_switches_of_its_absence() {
        let mut p = Pacer::NEW;
        let t1 = preempted(&mut p);
        // Two pollers on one core for a while: renewed, still contended when the thread
        // stops polling (its test ended).
        let end = ping_pong(&mut p, t1, 2000, HELD_RENEW);
        assert!(p.contended());
        // Back a second later, after many involuntary switches elsewhere, in a ping-pong
        // whose yields find nobody ready: the first held look ends the hold.
        let mut now = end + Duration::from_secs(1);
        let n = 1_000_000;
        let mut held = 0;
        while held == 0 {
            for _ in 0..3 {
                now += Duration::from_micros(1);
                if p.count() == Look::Held {
                    held += 1;
                    p.held_look(now, || Some((n, n)));
                }
            }
            found(&mut p, now, n);
        }
        assert!(!p.contended());
        assert!(now < end + Duration::from_secs(1) + Duration::from_millis(1));
    }

    #[test]
    fn a_gap_inside_a_stretch_with_a_preemption_is_contention() {
        let t0 = Instant::now();
        let mut p = Pacer::NEW;
        let t = spin(&mut p, t0, 3);
        looks(&mut p, t + Duration::from_millis(3), Some(4));
        assert!(p.contended());
    }

    #[test]
    fn gaps_between_the_stretches_of_a_ping_pong_are_not_contention() {
        // Each message: a few empty polls (less than a look's worth now and then a look),
        // then work; the thread is preempted now and then between messages (its count grows)
        // and the looks of consecutive stretches are milliseconds apart.
        let t0 = Instant::now();
        let mut p = Pacer::NEW;
        for m in 0..1000u64 {
            let t = t0 + Duration::from_millis(m);
            if m % 10 == 0 {
                looks(&mut p, t, Some(m));
            } else {
                for _ in 0..5 {
                    assert_eq!(p.count(), Look::No);
                }
            }
            found(&mut p, t + Duration::from_micros(3), m + 1);
            assert!(!p.contended(), "message {m}");
        }
    }

    #[test]
    fn a_gap_the_application_spent_elsewhere_is_not_contention() {
        let t0 = Instant::now();
        let mut p = Pacer::NEW;
        let t = spin(&mut p, t0, 7);
        // A gap, but no involuntary switch: the application computed between its polls.
        looks(&mut p, t + Duration::from_millis(3), Some(7));
        assert!(!p.contended());
        // Nor when the kernel does not say.
        looks(&mut p, t + Duration::from_millis(6), None);
        assert!(!p.contended());
    }

    #[test]
    fn a_short_stretch_never_asks_the_kernel() {
        let t0 = Instant::now();
        let mut p = Pacer::NEW;
        for i in 0..LONG / LOOK_EVERY - 1 {
            for _ in 0..LOOK_EVERY - 1 {
                p.count();
            }
            assert_eq!(p.count(), Look::Stretch);
            p.look(t0 + Duration::from_micros(u64::from(i)), || {
                panic!("getrusage asked in a short stretch without a gap")
            });
        }
        // Ended by work before it was long: no look either.
        assert!(!p.ends_long());
    }

    #[test]
    fn a_contended_thread_whose_yields_find_nobody_ready_stops_yielding() {
        let t0 = Instant::now();
        let mut p = Pacer::NEW;
        let t = spin(&mut p, t0, 3);
        let t1 = t + Duration::from_millis(4);
        looks(&mut p, t1, Some(4));
        assert!(p.contended());
        // Its yields keep handing the CPU over (another thread polls on the same core).
        let t2 = t1 + Duration::from_micros(100);
        looks(&mut p, t2, Some(9));
        assert!(p.contended());
        // Then a look without a gap and without a switch since the last one: alone again.
        let t3 = t2 + Duration::from_micros(100);
        looks(&mut p, t3, Some(9));
        assert!(!p.contended());
        // A later preemption while spinning makes it contended again.
        looks(&mut p, t3 + Duration::from_millis(4), Some(10));
        assert!(p.contended());
    }
}
