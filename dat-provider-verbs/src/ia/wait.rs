//! How application threads wait for completions, and how the event thread sees them: a
//! waiter arms every CQ and sleeps on the completion channel and an eventfd of its own
//! ([`Shared::block`], ended early by [`Shared::unblock`]); a thread that polls marks the IA
//! as polled, so the event thread leaves the CQs unarmed ([`Shared::app_active`]).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

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
    /// Ends every [`Shared::block`] in progress (and one about to start).
    pub fn unblock(&self) {
        self.unblocks.fetch_add(1, Ordering::AcqRel);
        for &fd in lock(&self.waiters).iter() {
            signal_raw(fd);
        }
    }

    /// True while an application thread drives the CQs itself: it polled within
    /// [`APP_IDLE`] of `now`, or it sleeps in [`Shared::block`] (which armed them). Called by
    /// the event thread only, which keeps in `last_active` when it last saw a poll.
    pub(crate) fn app_active(&self, now: Instant, last_active: &mut Instant) -> bool {
        if self.polled.swap(false, Ordering::Relaxed) {
            *last_active = now;
        }
        self.blocked.load(Ordering::Acquire) > 0
            || now.saturating_duration_since(*last_active) < APP_IDLE
    }

    /// Whether the event thread's CQs are armed.
    pub(crate) fn armed(&self) -> &AtomicBool {
        &self.armed
    }

    /// Arms every CQ (`ibv_req_notify_cq`) that is not armed yet (see [`Cq::arm`]: a CQ
    /// stays armed until its event is taken, so a waiter that blocks again pays a system call
    /// only for the CQs whose events were taken since, not one per CQ of the IA); the caller
    /// drains them after.
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

    /// Sleeps on the completion channel for at most `timeout` (the waiter's own arm, so a
    /// completion wakes it directly), then delivers what has completed.
    ///
    /// Each waiting thread sleeps on an eventfd of its own, registered while it sleeps, and
    /// [`Shared::unblock`] signals every one: waiters on different EVDs of the IA never take
    /// each other's wake-up. An unblock that comes between the facade's last look at its queue
    /// and the registration is caught by a counter, and the sleep is capped at
    /// [`BLOCK_CAP`] in case it came even before that.
    pub fn block(&self, timeout: std::time::Duration) -> bool {
        let seen = self.unblocks.load(Ordering::Acquire);
        let fd = WAITER_FD.with(|f| f.as_ref().map(AsRawFd::as_raw_fd));
        self.blocked.fetch_add(1, Ordering::AcqRel);
        if let Some(fd) = fd {
            lock(&self.waiters).push(fd);
        }
        self.arm_all();
        if !self.drain(true) && self.unblocks.load(Ordering::Acquire) == seen {
            let ms = timeout.min(BLOCK_CAP).as_millis().saturating_add(1);
            let ms = i32::try_from(ms).unwrap_or(i32::MAX);
            let mut fds = [
                libc::pollfd {
                    fd: self.comp.fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    // A negative descriptor is ignored by poll(2).
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
            while self.comp.take_event() {}
            self.drain(true);
        }
        if let Some(fd) = fd {
            lock(&self.waiters).retain(|&w| w != fd);
        }
        self.polled.store(true, Ordering::Relaxed);
        self.blocked.fetch_sub(1, Ordering::AcqRel);
        // The channel's events were taken here: the event thread must arm again once the
        // application goes quiet (unarmed, it looks every APP_IDLE to APP_LOOK_MAX by itself).
        if self.armed.swap(false, Ordering::AcqRel) {
            self.wake();
        }
        true
    }
}
