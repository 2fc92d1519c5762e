//! Two pollers on one CPU: a nap on the rings instead of a spin (issue 5, session 8).
//!
//! A thread that polls a connection (`dat_evd_dequeue` driving [`Transport::progress`])
//! while the peer's polling thread waits for the same CPU only keeps that CPU from it:
//! every message then waits for a preemption (shm 8 B about 711 us per half round trip
//! instead of about 2 in a bad start of `taskset -c 0 datperf lat`). The facade's pacing
//! (`dat::pace`) can only guess that from gaps in its own spinning, and every rule that made
//! it guess right on one core also kept a pair that merely *started* on one core of two there
//! (`BENCHMARKS.md`, session 7).
//!
//! So each side says where it polls: every [`ring::ANNOUNCE_EVERY`]th poll that takes
//! records from a connection announces the CPU it runs on in the connection's segment
//! (`sched_getcpu`: with glibc's restartable sequences a thread-local load; a store only when
//! it changed), so an active peer's announcement is never more than that many messages old
//! (an announcement made only by long waits went stale in a pair that later ran apart, and
//! one per message cost 57 instructions per round trip under cachegrind, session 9). Every [`CHECK_EVERY`]th empty poll in
//! a row *looks*: it announces its CPU too and reads the peer's. When [`SHARED_LOOKS`] looks
//! in a row find both on one CPU **and the thread may run on that CPU only** (its affinity,
//! asked every [`ASK_EVERY`] such looks), the poll *naps*: it arms the rings and sleeps on
//! their eventfds ([`Shared::sleep_on_rings`]), for at most [`NAP`], and the peer's next
//! record sees the armed flag and wakes it through the eventfd. Then, while both stay there,
//! it *yields* on every empty poll but a wait's first instead (one system call hands the
//! CPU over: a nap per message cost 7-12 us per message on one core here, yields about
//! 1.7), napping again after [`NAP_EVERY`] looks (a way out of any bad yielding state).
//!
//! Only pinned threads: a thread that may run elsewhere keeps the base behaviour exactly.
//! Naps were meant to let the kernel's wake-up path place a pair that started on one core
//! of two apart (it picks an idle CPU of the cache domain for a wakee whose CPU is busy),
//! but in the two quiet `datperf compare` runs of that build the in-process send/recv pair
//! stayed on one CPU at 1.54-1.67 us (base 0.24-0.48 in the same sitting), although
//! `examples/glued_start.rs` (a pair pinned to CPU 0, then released) was spread by them in
//! 3 of 3 runs. The wake-up path moves a wakee only to an idle CPU, and a napping pair has
//! one runnable thread at a time, so the idle CPU's load balancer finds nothing to pull,
//! while two threads that spin or yield are both runnable (session 8, `BENCHMARKS.md`).
//!
//! A nap ends when a record wakes it, at [`NAP`], or when another thread made upcalls that
//! may have queued what the poll waits for, where no ring wake-up will announce it again:
//! the provider thread (which pumps every millisecond while the application polls, and
//! sleeps on the same eventfds) or another poller. Every batch of upcalls counts in
//! [`Shared::deliveries`] and writes the unblock eventfd while a poll naps; a nap does not
//! start when the count moved since the poll before it. (Without this, session 7's nap from
//! `dequeue` slept its timeout out whenever the provider thread had taken the message.)
//!
//! Pollers on different CPUs never nap: an empty poll counts in thread-locals, a look makes a
//! few loads, and a poll that takes records reads its CPU. A thread asleep
//! in a wait (`Transport::block` from `dat_evd_wait`) announces no CPU, so a poller does not
//! nap for a peer that does not poll.

use super::*;

/// Empty polls in a row between two looks at the CPU.
const CHECK_EVERY: u32 = 16;
/// Looks in a row that find the peer on this CPU before a nap.
const SHARED_LOOKS: u32 = 2;
/// The longest nap (a record of the peer ends it sooner).
const NAP: Duration = Duration::from_millis(1);
/// Looks that find the CPU still shared after a nap, handing it over by yields, before the
/// next nap: the wake-up of a nap is the kernel's chance to place the thread on an idle CPU,
/// a yield never moves it (session 7: a pair that started on one core of two stayed there).
const NAP_EVERY: u32 = 64;

/// [`Shared::blocked`] while a facade waiter sleeps in `Transport::block`.
pub(super) const WAITING: u32 = 1;
/// [`Shared::blocked`] while a poll naps.
pub(super) const NAPPING: u32 = 2;

/// [`POLLS`]: set while a nap left this thread beside the peer. It then yields on every
/// empty poll, and its empty polls count across messages (a yield that hands the CPU over
/// makes the waits too short to reach a look of their own).
const YIELDING: u32 = 1 << 31;
/// [`POLLS`]: the previous poll was empty too (so [`SEEN`] was read after the caller last
/// found its queue empty).
const FRESH: u32 = 1 << 30;
/// [`POLLS`]: the count of empty polls.
const COUNT: u32 = FRESH - 1;

/// What a look remembers.
#[derive(Clone, Copy)]
struct Looks {
    /// Looks in a row that found the peer on this CPU.
    shared: u32,
    /// Looks that found the CPU shared since the last nap.
    since_nap: u32,
    /// The thread may run on one CPU only, as of the last question.
    pinned: bool,
    /// Looks until the affinity is asked again.
    ask_in: u32,
}

/// Looks that found the CPU shared between two questions of the thread's affinity.
const ASK_EVERY: u32 = 64;

/// True if the calling thread may run on one CPU only (asked every [`ASK_EVERY`] calls).
fn pinned(looks: &mut Looks) -> bool {
    if looks.ask_in == 0 {
        looks.pinned = sys::pinned_to_one_cpu();
        looks.ask_in = ASK_EVERY;
    }
    looks.ask_in -= 1;
    looks.pinned
}

thread_local! {
    /// Empty polls in a row on this thread ([`COUNT`]), [`FRESH`] and [`YIELDING`]. The only
    /// word a poll that finds work reads (and writes only after empty polls).
    static POLLS: Cell<u32> = const { Cell::new(0) };
    /// [`Shared::deliveries`] at the previous empty poll.
    static SEEN: Cell<u64> = const { Cell::new(0) };

    static LOOKS: Cell<Looks> = const {
        Cell::new(Looks {
            shared: 0,
            since_nap: 0,
            pinned: false,
            ask_in: 0,
        })
    };
    /// This thread naps: its own upcalls need not end the nap.
    static NAPPER: Cell<bool> = const { Cell::new(false) };
}

static NAPS: AtomicU64 = AtomicU64::new(0);
static SLEPT: AtomicU64 = AtomicU64::new(0);
static SLEPT_OUT: AtomicU64 = AtomicU64::new(0);
static YIELDS: AtomicU64 = AtomicU64::new(0);

/// What the naps of this process did so far (for tests and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NapCounts {
    /// Polls that napped: they found the peer's polling thread on their CPU.
    pub naps: u64,
    /// Naps that slept (the others found work, or upcalls of another thread, first).
    pub slept: u64,
    /// Naps that slept until their timeout: no record, no upcall of another thread came.
    pub slept_out: u64,
    /// Empty polls that yielded the CPU: a nap left the thread beside its peer.
    pub yields: u64,
}

/// The naps of every shm IA in this process so far.
pub fn nap_counts() -> NapCounts {
    NapCounts {
        naps: NAPS.load(Ordering::Relaxed),
        slept: SLEPT.load(Ordering::Relaxed),
        slept_out: SLEPT_OUT.load(Ordering::Relaxed),
        yields: YIELDS.load(Ordering::Relaxed),
    }
}

/// Gives the CPU to the peer polling beside this thread.
fn yield_cpu() {
    YIELDS.fetch_add(1, Ordering::Relaxed);
    std::thread::yield_now();
}

impl ShmIa {
    /// [`Transport::progress`]: a poll, and a nap (or a yield) when it found nothing for a
    /// while and the peer polls on this CPU.
    #[inline]
    pub(super) fn progress_or_nap(&self) -> bool {
        // Upcalls of other threads (the provider thread, another poller) may have queued
        // what the caller polls for, after it found its queue empty: a nap must not sleep on
        // them. Counted from the previous poll if that was empty too (the caller looked at
        // its queue after it), else from here (a few instructions after the caller looked).
        let before = self.shared.deliveries.load(Ordering::Acquire);
        if self.poll() == Some(true) {
            let p = POLLS.get();
            if p != 0 {
                POLLS.set(if p < YIELDING {
                    0
                } else {
                    YIELDING | (p & COUNT)
                });
            }
            return true;
        }
        let p = POLLS.get();
        let fresh = p & FRESH != 0;
        let since = if fresh { SEEN.get() } else { before };
        SEEN.set(self.shared.deliveries.load(Ordering::Acquire));
        let p = (p & YIELDING) | FRESH | (p.wrapping_add(1) & COUNT);
        POLLS.set(p);
        if (p & COUNT).is_multiple_of(CHECK_EVERY) {
            return self.look(p, since, fresh);
        }
        if p >= YIELDING && fresh {
            yield_cpu();
        }
        false
    }

    /// The look of every [`CHECK_EVERY`]th empty poll in a row (out of line: most polls skip
    /// it). A pair that hands one CPU over by the facade's yields (once the facade saw a
    /// preemption) never waits that long and is left to them: looking every 256 empty polls
    /// in all as well, and napping and yielding on top of the facade, cost one-core pairs
    /// 1.7-2.3 us per message instead of 1.6-1.7 (session 8).
    ///
    /// While yielding, only the second and later empty polls of a wait yield: the first one
    /// is left to the facade, which yields too once it saw this thread preempted (two
    /// yields per empty poll cost one-core pairs 2.8-4.9 us per message instead of 1.7).
    #[inline(never)]
    fn look(&self, p: u32, since: u64, fresh: bool) -> bool {
        let mut looks = LOOKS.get();
        if !self.shared.share_cpu() || !pinned(&mut looks) {
            looks.shared = 0;
            LOOKS.set(looks);
            POLLS.set(p & !YIELDING);
            return false;
        }
        looks.shared += 1;
        let yielding = p >= YIELDING;
        let yield_now = yielding && fresh;
        if looks.shared < SHARED_LOOKS || DELIVERING.with(Cell::get) {
            LOOKS.set(looks);
            if yield_now {
                yield_cpu();
            }
            return false;
        }
        looks.since_nap += 1;
        if yielding && looks.since_nap < NAP_EVERY {
            LOOKS.set(looks);
            if yield_now {
                yield_cpu();
            }
            return false;
        }
        looks.since_nap = 0;
        LOOKS.set(looks);
        NAPS.fetch_add(1, Ordering::Relaxed);
        NAPPER.set(true);
        let slept = self.shared.sleep_on_rings(NAP, NAPPING, Some(since));
        NAPPER.set(false);
        let woken = slept.is_some_and(|s| s.woken);
        if slept.is_some_and(|s| s.slept) {
            SLEPT.fetch_add(1, Ordering::Relaxed);
            if !woken {
                SLEPT_OUT.fetch_add(1, Ordering::Relaxed);
            }
        }
        // Still beside the peer (pinned there, or no idle CPU to be woken on): hand the CPU
        // over by yields until the next nap. Placed apart: poll as before.
        POLLS.set(if slept.is_none_or(|s| s.shared) {
            YIELDING | FRESH
        } else {
            FRESH
        });
        woken
    }
}

/// How a [`Shared::sleep_on_rings`] went.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slept {
    /// Something was moved, or a wake-up came (not the timeout).
    pub(super) woken: bool,
    /// A nap's thread found a peer's poller on its CPU after it (or did not sleep).
    pub(super) shared: bool,
    /// It slept (nothing was ready).
    pub(super) slept: bool,
}

impl Shared {
    /// A batch of upcalls was made (under the upcall turn, so the count has one writer at a
    /// time). A poll napping on another thread is woken: the batch may have queued what it
    /// polls for, where its rings' wake-ups will never announce it. (The count is read by
    /// the nap after it marked itself in `blocked`; this load of `blocked` may pass the
    /// store of the count, and a nap that slips through that window of a few nanoseconds
    /// sleeps its [`NAP`] out.)
    #[inline]
    pub(super) fn delivered(&self) {
        let n = self.deliveries.load(Ordering::Relaxed).wrapping_add(1);
        self.deliveries.store(n, Ordering::Release);
        if self.blocked.load(Ordering::Acquire) == NAPPING && !NAPPER.get() {
            sys::signal(self.app_wake.as_fd());
        }
    }

    /// Announces this thread's CPU on every connected connection; true if the peer of any
    /// of them announced the same CPU. Nothing when another thread holds the state.
    fn share_cpu(&self) -> bool {
        let Some(cpu) = sys::current_cpu() else {
            return false;
        };
        let Some(mut st) = self.state.try_lock() else {
            return false;
        };
        let mut shared = false;
        for c in st.conns.values_mut() {
            if let (Phase::Connected, Some(d)) = (&c.phase, c.data.as_mut()) {
                shared |= d.share_cpu(Some(cpu));
            }
        }
        shared
    }

    /// Arms every connected ring and sleeps on their eventfds (and the unblock eventfd) for
    /// up to `timeout`, then moves data on the calling thread: completions reach the EVD from
    /// this thread, with no hand-off from the provider thread. `who` is [`WAITING`] (a
    /// facade waiter: it announces no CPU while asleep) or [`NAPPING`] (a poll: it keeps
    /// its CPU announced, and announces it again after the nap).
    ///
    /// One thread of the IA at a time: its sleepers share one unblock eventfd, and epoll
    /// wakes one sleeper per event, so a second one could sleep through the wake-up meant
    /// for it. `None` for the others (and when waiting in the provider is off, or the IA
    /// closes).
    pub(super) fn sleep_on_rings(
        &self,
        timeout: Duration,
        who: u32,
        since: Option<u64>,
    ) -> Option<Slept> {
        if !self.params.wait_in_provider
            || self.stop.load(Ordering::Acquire)
            || self
                .blocked
                .compare_exchange(0, who, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return None;
        }
        let mut out = Ups::new();
        let mut st = self.enter();
        let mut ready = self.pump_all(&mut st, &mut out) || !out.is_empty();
        if !ready {
            for c in st.conns.values_mut() {
                if let (Phase::Connected, Some(d)) = (&c.phase, c.data.as_mut()) {
                    if who == WAITING {
                        d.share_cpu(None);
                    }
                    // True: something arrived before the peer could see the request.
                    ready |= d.arm();
                }
            }
            // Upcalls made by another thread since `since` (see `Shared::delivered`).
            ready |= since.is_some_and(|s| s != self.deliveries.load(Ordering::Acquire));
        }
        self.finish(st, &mut out);
        let mut woken = ready;
        let mut shared = true;
        if !ready {
            let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
            let mut tokens = Vec::new();
            self.app_epoll.wait(&mut tokens, ms);
            woken = !tokens.is_empty();
            let mut st = self.enter();
            let mut consumed = false;
            for t in tokens {
                if t == TOK_WAKE {
                    sys::drain(self.app_wake.as_fd());
                } else if let Some(d) = st.conns.get(&(t & TOK_MASK)).and_then(|c| c.data.as_ref())
                {
                    // The pump below takes what it announced (on every connection).
                    sys::drain(d.my_efd.as_fd());
                    consumed = true;
                }
            }
            woken |= self.pump_all(&mut st, &mut out);
            // The wake-up just drained was the provider thread's too (see `Shared::parked`):
            // arm the rings again on its behalf, and wake it if something slipped in before
            // the peers could see the flags.
            let again = consumed && self.parked.load(Ordering::Relaxed);
            let cpu = if who == NAPPING {
                sys::current_cpu()
            } else {
                None
            };
            if again || cpu.is_some() {
                let mut missed = false;
                shared = false;
                for c in st.conns.values_mut() {
                    if let (Phase::Connected, Some(d)) = (&c.phase, c.data.as_mut()) {
                        if cpu.is_some() {
                            shared |= d.share_cpu(cpu);
                        }
                        if again {
                            missed |= d.arm();
                        }
                    }
                }
                if missed {
                    self.poke();
                }
            }
            self.finish(st, &mut out);
        }
        self.blocked.store(0, Ordering::Release);
        Some(Slept {
            woken,
            shared,
            slept: !ready,
        })
    }
}
