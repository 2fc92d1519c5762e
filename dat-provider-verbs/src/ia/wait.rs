//! How application threads wait for completions, and how the event thread sees them: a
//! waiter arms the CQ of the EVD it waits for and sleeps on that CQ's own completion channel
//! and an eventfd of its own ([`Shared::block`], ended early by [`Shared::unblock`] of its
//! EVD); a thread that polls or wakes marks the IA as polled, so the event thread leaves the
//! CQs unarmed ([`Shared::app_active`]).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use dat_core::types::EvdId;

use super::{APP_IDLE, Shared, eventfd, lock, read, signal_raw};

/// The longest a waiter sleeps in [`Shared::block`] before it looks at its queue again (a
/// safety net for an unblock that came before it registered).
pub const BLOCK_CAP: std::time::Duration = std::time::Duration::from_millis(20);

thread_local! {
    /// The eventfd this thread sleeps on in [`Shared::block`] (`None` if it could not be made:
    /// the thread then sleeps at most [`BLOCK_CAP`] at a time).
    static WAITER_FD: Option<OwnedFd> = eventfd().ok();
}

pub(crate) fn drain_eventfd(fd: &OwnedFd) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
    let _ = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
}

impl Shared {
    /// Ends every [`Shared::block`] on `evd` in progress (and one about to start, of any
    /// EVD: see the counter in `block`). The calling thread's own block is not signalled: it
    /// is the one delivering (its block's drain), and the counter keeps it from sleeping.
    pub fn unblock(&self, evd: EvdId) {
        self.unblocks.fetch_add(1, Ordering::AcqRel);
        let me = WAITER_FD.with(|f| f.as_ref().map(AsRawFd::as_raw_fd));
        for &(e, fd) in lock(&self.waiters).iter() {
            if e == evd && Some(fd) != me {
                signal_raw(fd);
            }
        }
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
    /// own EVD's events only. An unblock that comes between the facade's last look at its
    /// queue and the registration is caught by a counter, and the sleep is capped at
    /// [`BLOCK_CAP`] in case it came even before that. Only the EVD's own CQ is drained here:
    /// the others are their own waiters' and pollers' (delivering another waiter's completion
    /// would cost it a second wake-up); the facade's waiter drives every CQ through
    /// [`Shared::progress`] while it spins, and the event thread does once the application
    /// is quiet.
    pub fn block(&self, evd: EvdId, timeout: std::time::Duration) -> bool {
        let seen = self.unblocks.load(Ordering::Acquire);
        let fd = WAITER_FD.with(|f| f.as_ref().map(AsRawFd::as_raw_fd));
        if let Some(fd) = fd {
            lock(&self.waiters).push((evd, fd));
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
        if !any && self.unblocks.load(Ordering::Acquire) == seen {
            let ms = timeout.min(BLOCK_CAP).as_millis().saturating_add(1);
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
            // SAFETY: `fds` is a live array of two pollfd for the call.
            unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
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
            if let Some(i) = w.iter().position(|&(e, f)| e == evd && f == fd) {
                w.swap_remove(i);
            }
        }
        self.polled.store(true, Ordering::Relaxed);
        true
    }
}
