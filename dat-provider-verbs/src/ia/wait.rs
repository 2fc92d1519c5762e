//! How application threads wait for completions, and how the event thread sees them: a
//! waiter arms the CQ of the EVD it waits for and sleeps on that CQ's own completion channel
//! and an eventfd of its own ([`Shared::block`], ended early by [`Shared::unblock`] of its
//! EVD); a thread that polls or wakes marks the IA as polled, so the event thread leaves the
//! CQs unarmed ([`Shared::app_active`]).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use dat_core::types::EvdId;

use super::{APP_IDLE, APP_LOOK_MAX, APP_LOOK_QUIET_MAX, Shared, eventfd, lock, read, signal_raw};

/// The longest a thread without an eventfd of its own sleeps in [`Shared::block`] at a time
/// ([`Shared::unblock`] cannot signal it, so it looks at its queue again this often). A
/// thread with one sleeps for the whole timeout it is given.
pub const BLOCK_CAP: std::time::Duration = std::time::Duration::from_millis(20);

thread_local! {
    /// The eventfd this thread sleeps on in [`Shared::block`] (`None` if it could not be made:
    /// the thread then sleeps at most [`BLOCK_CAP`] at a time).
    static WAITER_FD: Option<OwnedFd> = eventfd().ok();
}

/// Who sleeps in [`Shared::block`], and the unblocks that found nobody to signal.
///
/// An unblock is kept for the next block of its EVD when it signals no thread: one that comes
/// between the facade's last look at the EVD's queue and the waiter's registration here (the
/// facade has counted the waiter as blocked, so it calls [`Shared::unblock`], but the waiter
/// is not asleep yet), or one made by the waiter itself while its block drains the EVD's CQ.
/// The block that takes it does not sleep. A kept unblock nobody takes (the waiter was
/// leaving) costs the EVD's next block one spurious return, which the facade's loop absorbs:
/// so no waiter sleeps past an event, and none needs to wake up on a timer to make sure
/// (it did every 20 ms, 50 wake-ups a second of an idle `dat_evd_wait`).
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    /// The threads asleep in [`Shared::block`]: the EVD each waits for and its eventfd.
    asleep: Vec<(EvdId, RawFd)>,
    /// The EVDs with an unblock kept for their next block (each at most once).
    kept: Vec<EvdId>,
}

impl Waiters {
    /// Signals the sleepers of `evd` but `me`; keeps the unblock if there were none.
    fn unblock(&mut self, evd: EvdId, me: Option<RawFd>) {
        let mut signalled = false;
        for &(e, fd) in &self.asleep {
            if e == evd && Some(fd) != me {
                signal_raw(fd);
                signalled = true;
            }
        }
        if !signalled && !self.kept.contains(&evd) {
            self.kept.push(evd);
        }
    }

    /// Takes the unblock kept for `evd`, if any.
    fn take(&mut self, evd: EvdId) -> bool {
        match self.kept.iter().position(|&e| e == evd) {
            Some(i) => {
                self.kept.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Forgets a freed EVD's kept unblock.
    pub(crate) fn forget(&mut self, evd: EvdId) {
        self.take(evd);
    }
}

pub(crate) fn drain_eventfd(fd: &OwnedFd) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
    let _ = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
}

impl Shared {
    /// Ends every [`Shared::block`] on `evd` in progress, or else the next one to start (see
    /// [`Waiters`]). The calling thread's own block is not signalled: it is the one
    /// delivering (its block's drain), and the kept unblock keeps it from sleeping.
    pub fn unblock(&self, evd: EvdId) {
        let me = WAITER_FD.with(|f| f.as_ref().map(AsRawFd::as_raw_fd));
        lock(&self.waiters).unblock(evd, me);
    }

    /// An application thread begins (`begins`) or ends a sleep in the provider: in
    /// [`Shared::block`], or outside it (`Transport::sleeping`: a CNO wait). While one
    /// sleeps, the event thread looks at a polling application at most every
    /// [`APP_LOOK_MAX`] (it arms the CQs soon after the polls stop, for the sleeper); the
    /// sleeper that finds it in a longer sleep wakes it.
    pub fn sleeping(&self, begins: bool) {
        if begins {
            // SeqCst, with the event thread's store of `long_look` and load of `sleepers`:
            // either it sees this sleeper or this sees its long sleep.
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            if self.long_look.load(Ordering::SeqCst) && self.long_look.swap(false, Ordering::SeqCst)
            {
                self.wake();
            }
        } else {
            self.sleepers.fetch_sub(1, Ordering::Release);
        }
    }

    /// The longest the event thread may sleep before its next look at a polling
    /// application, and whether it may go beyond [`APP_LOOK_MAX`] (no thread sleeps in the
    /// provider): `look` doubled, capped. Called by the event thread only, before it sleeps
    /// with its CQs unarmed.
    pub(crate) fn next_look(&self, look: std::time::Duration) -> std::time::Duration {
        self.long_look.store(true, Ordering::SeqCst);
        let cap = if self.sleepers.load(Ordering::SeqCst) > 0 {
            APP_LOOK_MAX
        } else {
            APP_LOOK_QUIET_MAX
        };
        let next = (look * 2).min(cap);
        if next <= APP_LOOK_MAX {
            self.long_look.store(false, Ordering::SeqCst);
        }
        next
    }

    /// Tells the event thread it need not be woken by a sleeper (it sleeps no longer than
    /// [`APP_LOOK_MAX`], or has armed the CQs).
    pub(crate) fn short_look(&self) {
        self.long_look.store(false, Ordering::Relaxed);
    }

    /// True while an application thread drives the CQs itself: it polled within
    /// [`APP_IDLE`] of `now` (a waiter counts when it wakes, not while it sleeps: asleep it
    /// watches only its own EVD's CQ). Called by the event thread only, which keeps in
    /// `last_active` when it last saw a poll.
    pub(crate) fn app_active(&self, now: Instant, last_active: &mut Instant) -> bool {
        if self.polled.swap(false, Ordering::Relaxed) {
            *last_active = now;
        }
        now.saturating_duration_since(*last_active) < APP_IDLE
    }

    /// Whether the event thread's CQs are armed.
    pub(crate) fn armed(&self) -> &AtomicBool {
        &self.armed
    }

    /// Arms every CQ (`ibv_req_notify_cq`) that is not armed yet (see [`Cq::arm`]: a CQ
    /// stays armed until its event is taken, so arming again pays a system call only for the
    /// CQs whose events were taken since); the caller drains them after.
    ///
    /// [`Cq::arm`]: crate::verbs::Cq::arm
    pub(crate) fn arm_all(&self) {
        let list = read(&self.snapshot).clone();
        for slot in list.iter() {
            if let Err(e) = slot.cq.arm() {
                tracing::warn!(ia = %self.name, error = %e, "ibv_req_notify_cq failed");
            }
        }
    }

    /// Polls every CQ; with `wait` false a CQ another thread is polling is left to it.
    pub(crate) fn drain(&self, wait: bool) -> bool {
        let list = read(&self.snapshot).clone();
        let mut any = false;
        for slot in list.iter() {
            any |= self.poll_cq(slot, wait);
        }
        any
    }

    /// Sleeps for at most `timeout` on the completion channel of the CQ of `evd` (armed by
    /// the waiter, so a completion of that EVD wakes it directly and no other waiter), then
    /// delivers what has completed. An EVD without a CQ (connection, software events) is
    /// woken by [`Shared::unblock`] only.
    ///
    /// Each waiting thread sleeps on an eventfd of its own, registered with its EVD while it
    /// sleeps, and [`Shared::unblock`] signals the ones of its EVD: a waiter is woken by its
    /// own EVD's events only. An unblock that comes before the registration is kept for it
    /// ([`Waiters`]), so the sleep needs no cap. Only the EVD's own CQ is drained here: the
    /// others are their own waiters' and pollers' (delivering another waiter's completion
    /// would cost it a second wake-up); the facade's waiter drives every CQ through
    /// [`Shared::progress`] while it spins, and the event thread does once the application
    /// is quiet.
    pub fn block(&self, evd: EvdId, timeout: std::time::Duration) -> bool {
        let fd = WAITER_FD.with(|f| f.as_ref().map(AsRawFd::as_raw_fd));
        if let Some(fd) = fd {
            lock(&self.waiters).asleep.push((evd, fd));
        }
        let own = read(&self.cqs).get(&evd).cloned();
        if let Some(slot) = &own
            && let Err(e) = slot.cq.arm()
        {
            tracing::warn!(ia = %self.name, error = %e, "ibv_req_notify_cq failed");
        }
        // Armed, then drained: a completion before the arm is found here, one after it
        // raises an event.
        let any = own.as_ref().is_some_and(|s| self.poll_cq(s, true));
        // Taken after the drain: its deliveries' own unblocks are kept too.
        let kept = lock(&self.waiters).take(evd);
        if !any && !kept {
            let cap = if fd.is_some() {
                timeout
            } else {
                timeout.min(BLOCK_CAP)
            };
            let ms = cap.as_millis().saturating_add(1);
            let ms = i32::try_from(ms).unwrap_or(i32::MAX);
            let mut fds = [
                libc::pollfd {
                    // A negative descriptor is ignored by poll(2).
                    fd: own.as_ref().map_or(-1, |s| s.cq.channel_fd()),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: fd.unwrap_or(-1),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            self.sleeping(true);
            // SAFETY: `fds` is a live array of two pollfd for the call.
            unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
            self.sleeping(false);
            if fds[1].revents != 0 {
                WAITER_FD.with(|f| {
                    if let Some(f) = f {
                        drain_eventfd(f);
                    }
                });
            }
            if let Some(slot) = &own {
                // The event thread may watch this channel too (while it has armed every
                // CQ): it must arm this CQ again once the application goes quiet.
                if slot.cq.take_event() && self.armed.swap(false, Ordering::AcqRel) {
                    self.wake();
                }
                self.poll_cq(slot, true);
            }
        }
        if let Some(fd) = fd {
            let mut w = lock(&self.waiters);
            if let Some(i) = w.asleep.iter().position(|&(e, f)| e == evd && f == fd) {
                w.asleep.swap_remove(i);
            }
        }
        self.polled.store(true, Ordering::Relaxed);
        true
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsRawFd, OwnedFd};

    use dat_core::types::EvdId;

    use super::{Waiters, drain_eventfd};
    use crate::ia::eventfd;

    /// Whether `fd` (a non-blocking eventfd) was signalled; drains it.
    fn signalled(fd: &OwnedFd) -> bool {
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd for the call, no wait.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        drain_eventfd(fd);
        n == 1
    }

    #[test]
    fn an_unblock_without_a_sleeper_is_kept_once_for_the_next_block() {
        let mut w = Waiters::default();
        let (a, b) = (EvdId(1), EvdId(2));
        w.unblock(a, None);
        w.unblock(a, None);
        assert!(!w.take(b), "kept for its own EVD only");
        assert!(w.take(a), "the next block of the EVD takes it");
        assert!(!w.take(a), "kept once, however many unblocks came");
    }

    #[test]
    fn an_unblock_signals_the_evds_sleepers_and_keeps_nothing() {
        let mut w = Waiters::default();
        let (mine, other) = (eventfd().unwrap(), eventfd().unwrap());
        w.asleep.push((EvdId(1), mine.as_raw_fd()));
        w.asleep.push((EvdId(2), other.as_raw_fd()));
        w.unblock(EvdId(1), None);
        assert!(signalled(&mine));
        assert!(!signalled(&other), "another EVD's sleeper is not woken");
        assert!(!w.take(EvdId(1)), "a signalled sleeper needs nothing kept");
    }

    #[test]
    fn the_callers_own_block_is_not_signalled_but_its_unblock_is_kept() {
        // A block that delivers its own EVD's completion while it drains the CQ.
        let mut w = Waiters::default();
        let me = eventfd().unwrap();
        w.asleep.push((EvdId(3), me.as_raw_fd()));
        w.unblock(EvdId(3), Some(me.as_raw_fd()));
        assert!(!signalled(&me));
        assert!(w.take(EvdId(3)), "kept: the block then does not sleep");
    }

    #[test]
    fn a_freed_evds_kept_unblock_is_forgotten() {
        let mut w = Waiters::default();
        w.unblock(EvdId(4), None);
        w.forget(EvdId(4));
        assert!(!w.take(EvdId(4)));
    }
}
