//! [`Outstanding`]: what an endpoint has posted and not yet seen reported
//! (`dat_ep_get_status`), counted without an atomic read-modify-write on the usual path.
//!
//! Each queue (receives, requests) has two monotonic pairs of counts: posts and reports
//! made on the endpoint's *owner* thread, and those made on any other thread. The owner is
//! the first thread that posts on the endpoint; it alone writes its pair, so it counts with
//! a plain load and store (no `lock` prefix, no barrier). Other threads add to the shared
//! pair atomically, as every post did before. A ping-pong whose thread posts and polls its
//! own endpoint (the usual pattern) therefore counts without a single atomic
//! read-modify-write; an endpoint posted to from several threads pays one per post on all
//! but one of them.
//!
//! What is outstanding is the posts minus the reports. [`Outstanding::get`] reads the
//! reports first, then the posts (every count is written with Release, read with Acquire):
//! a report it sees follows its post, which it then sees too, so the difference never
//! counts a report without its post. As before, a post or report made during the read may
//! be missed (a moment's overcount or undercount of that one post).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The receive queue's index.
pub(crate) const RECV: usize = 0;
/// The request queue's index.
pub(crate) const REQUEST: usize = 1;

/// This thread's id, the one its posts and reports count under (`handoff::thread_id`: one
/// load, no call). An id is distinct between live threads; a thread that ended may pass its
/// id on to a new one, which then counts as the endpoint's owner if the old one was: its
/// counts carry on from the old owner's, whose last writes came before its end, which came
/// before the new thread's start (the C library reuses a thread's control block only after
/// the thread is gone, under its own lock).
#[inline(always)]
pub(crate) fn thread() -> usize {
    crate::handoff::thread_id()
}

/// One thread's counts or the shared ones: posts and reports per queue.
#[derive(Default)]
struct Pair {
    posted: [AtomicU64; 2],
    reported: [AtomicU64; 2],
}

/// The counts of one endpoint (see the [module documentation](self)).
#[derive(Default)]
pub(crate) struct Outstanding {
    /// The owner's thread id ([`thread`]), 0 until the first post.
    owner: AtomicUsize,
    /// Written by the owner only.
    own: Pair,
    /// Written by any other thread, atomically.
    shared: Pair,
}

/// Adds `n` to a count only the calling thread writes.
#[inline(always)]
fn bump_own(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Release);
}

impl Outstanding {
    /// True if thread `me` is the owner (the first thread to ask becomes it).
    #[inline(always)]
    fn mine(&self, me: usize) -> bool {
        match self.owner.load(Ordering::Relaxed) {
            o if o == me => true,
            0 => self.claim(me),
            _ => false,
        }
    }

    #[cold]
    fn claim(&self, me: usize) -> bool {
        self.owner
            .compare_exchange(0, me, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Counts a post on queue `q` by thread `me` ([`thread`]) in, before
    /// the transport sees it.
    #[inline(always)]
    pub(crate) fn post(&self, q: usize, me: usize) {
        if self.mine(me) {
            bump_own(&self.own.posted[q], 1);
        } else {
            self.post_shared(q);
        }
    }

    #[cold]
    fn post_shared(&self, q: usize) {
        self.shared.posted[q].fetch_add(1, Ordering::Release);
    }

    /// Counts `n` posts on queue `q` out: reported, or refused by the transport.
    #[inline(always)]
    pub(crate) fn report(&self, q: usize, n: u64) {
        self.report_by(q, n, thread());
    }

    /// [`Outstanding::report`] by thread `me` ([`thread`]), for a caller that has it.
    #[inline(always)]
    pub(crate) fn report_by(&self, q: usize, n: u64, me: usize) {
        if self.owner.load(Ordering::Relaxed) == me {
            bump_own(&self.own.reported[q], n);
        } else {
            self.report_shared(q, n);
        }
    }

    #[cold]
    fn report_shared(&self, q: usize, n: u64) {
        self.shared.reported[q].fetch_add(n, Ordering::Release);
    }

    /// Posts on queue `q` not reported yet.
    pub(crate) fn get(&self, q: usize) -> u64 {
        let reported = self.own.reported[q]
            .load(Ordering::Acquire)
            .wrapping_add(self.shared.reported[q].load(Ordering::Acquire));
        let posted = self.own.posted[q]
            .load(Ordering::Acquire)
            .wrapping_add(self.shared.posted[q].load(Ordering::Acquire));
        // Never below zero by the rule above; read as signed all the same, so that a
        // transport reporting a post twice shows an idle queue rather than 2^64 - 1 posts.
        u64::try_from(posted.wrapping_sub(reported).cast_signed()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_on_the_owners_thread_counts_into_its_pair() {
        let other = std::thread::spawn(thread).join().unwrap();
        assert_ne!(other, thread());
        assert_ne!(thread(), 0);
        let o = Outstanding::default();
        o.post(REQUEST, thread());
        o.report(REQUEST, 1);
        assert_eq!(o.own.reported[REQUEST].load(Ordering::Relaxed), 1);
        assert_eq!(o.shared.reported[REQUEST].load(Ordering::Relaxed), 0);
    }

    #[test]
    fn the_owner_and_other_threads_count_into_one_figure() {
        let o = Outstanding::default();
        o.post(RECV, thread());
        o.post(REQUEST, thread());
        o.post(REQUEST, thread());
        assert_eq!((o.get(RECV), o.get(REQUEST)), (1, 2));
        assert_eq!(
            o.owner.load(Ordering::Relaxed),
            thread(),
            "the first poster owns"
        );
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..1000 {
                    o.post(REQUEST, thread());
                }
                o.report(RECV, 1);
                o.report(REQUEST, 500);
            });
            s.spawn(|| o.report(REQUEST, 2));
        });
        assert_eq!(o.shared.posted[REQUEST].load(Ordering::Relaxed), 1000);
        assert_eq!((o.get(RECV), o.get(REQUEST)), (0, 500));
        o.report(REQUEST, 500);
        assert_eq!(o.own.reported[REQUEST].load(Ordering::Relaxed), 500);
        assert_eq!(o.get(REQUEST), 0);
        // More reports than posts (a transport's mistake) reads as idle.
        o.report(RECV, 1);
        assert_eq!(o.get(RECV), 0);
    }
}
