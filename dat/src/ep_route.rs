//! [`Routes`]: where an endpoint's DTO completions go, readable without any lock or
//! reference count, so that a completion upcall costs one lock (the EVD's) and nothing else.
//!
//! The upcall link the transport holds shares the routes with the endpoint (no weak
//! reference to upgrade per completion). A [`Route`] is immutable once published; when
//! `dat_ep_modify` changes a DTO EVD a new one replaces it as a whole, and the replaced ones
//! stay allocated until the endpoint and its link are gone (a modify of the EVDs is a rare
//! consumer call). The routes hold the EVDs; a transport drops the link at `free_ep` and at
//! `close` (see `Transport::close`), which ends that hold.
//!
//! The routes also count what is outstanding on the endpoint (`dat_ep_get_status`): a post
//! the transport accepts counts in ([`Routes::posting`]), its completion or retirement
//! counts out (the rule of `dat_core::provider::EpUpcalls`: each accepted post is reported
//! exactly once). On the endpoint's owner thread neither is an atomic read-modify-write
//! (`ep_count`).

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};

use dat_core::evd::{DtoCompletion, Signal};
use dat_core::provider::Completion;
use dat_core::types::{CompletionFlags, DtoOp, DtoStatus, EpId};

use crate::ep::EpCore;
use crate::ep_count::{Outstanding, RECV, REQUEST};
use crate::evd::EvdInner;
use crate::sync::lock;

/// One endpoint's DTO EVDs.
struct Route {
    recv: Option<Arc<EvdInner>>,
    request: Option<Arc<EvdInner>>,
}

impl Route {
    fn of(core: &EpCore) -> Route {
        Route {
            recv: core.recv_evd.as_ref().map(|e| e.inner.clone()),
            request: core.request_evd.as_ref().map(|e| e.inner.clone()),
        }
    }

    fn same(a: Option<&Arc<EvdInner>>, b: Option<&Arc<EvdInner>>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        }
    }

    fn matches(&self, core: &EpCore) -> bool {
        Route::same(self.recv.as_ref(), core.recv_evd.as_ref().map(|e| &e.inner))
            && Route::same(
                self.request.as_ref(),
                core.request_evd.as_ref().map(|e| &e.inner),
            )
    }
}

/// The current route of an endpoint and every route it had, and the count of its posts
/// outstanding.
pub(crate) struct Routes {
    ep: EpId,
    /// The endpoint takes its receives from an SRQ: receive completions were posted to the
    /// SRQ, not counted here (fixed at creation, as the binding).
    srq: bool,
    /// Posts outstanding: receives, requests (counted in before the transport sees a post,
    /// so a completion never counts out one that is not in yet).
    outstanding: Outstanding,
    /// The current route: never null, always `Arc::as_ptr` of an entry of `all`.
    current: AtomicPtr<Route>,
    /// Every route published, the current one last. Entries are only ever added, so each
    /// stays valid for as long as `self` lives.
    all: Mutex<Vec<Arc<Route>>>,
}

impl Routes {
    pub(crate) fn new(ep: EpId, core: &EpCore) -> Routes {
        let first = Arc::new(Route::of(core));
        Routes {
            ep,
            srq: core.srq.is_some(),
            outstanding: Outstanding::default(),
            current: AtomicPtr::new(Arc::as_ptr(&first).cast_mut()),
            all: Mutex::new(vec![first]),
        }
    }

    #[inline]
    fn current(&self) -> &Route {
        let p = self.current.load(Ordering::Acquire);
        // SAFETY: `p` is `Arc::as_ptr` of a route held by `self.all` (stored in `new`, and in
        // `publish` with Release ordering after the route was fully built, so this Acquire
        // load sees it complete); entries are never removed from `self.all` nor changed
        // while `self` lives (no `&mut` to a route ever exists), and the returned borrow
        // cannot outlive `self`.
        unsafe { &*p }
    }

    /// Publishes a new route if the core's EVDs differ from the current one. The caller
    /// holds the endpoint's core mutex, which serialises writers.
    pub(crate) fn publish(&self, core: &EpCore) {
        if self.current().matches(core) {
            return;
        }
        let next = Arc::new(Route::of(core));
        let p = Arc::as_ptr(&next).cast_mut();
        lock(&self.all).push(next);
        self.current.store(p, Ordering::Release);
    }

    /// Counts in a post of a receive (`recv`) or a request by thread `me`
    /// (`ep_count::thread`), before it goes to the transport; [`Routes::unpost`]
    /// takes it back if the transport refuses it.
    #[inline]
    pub(crate) fn posting(&self, recv: bool, me: usize) {
        self.outstanding.post(if recv { RECV } else { REQUEST }, me);
    }

    /// Counts out a post the transport refused.
    #[cold]
    pub(crate) fn unpost(&self, recv: bool) {
        self.outstanding
            .report(if recv { RECV } else { REQUEST }, 1);
    }

    /// Counts out `n` requests posted with SUPPRESS that completed successfully without an
    /// upcall each (`EpUpcalls::retired`).
    pub(crate) fn retired(&self, n: u32) {
        self.outstanding.report(REQUEST, u64::from(n));
    }

    /// Receives and requests posted whose completion has not been reported yet.
    pub(crate) fn outstanding(&self) -> (u64, u64) {
        (self.outstanding.get(RECV), self.outstanding.get(REQUEST))
    }

    /// Queues a DTO completion on the right EVD, applying SUPPRESS and UNSIGNALLED, and
    /// counts its post out.
    pub(crate) fn deliver(&self, c: Completion) {
        // This thread's id, which the hand-off (`push_dto`) compares too.
        let me = crate::handoff::thread_id();
        let recv = c.op == DtoOp::Receive;
        if !(recv && self.srq) {
            self.outstanding
                .report_by(if recv { RECV } else { REQUEST }, 1, me);
        }
        if c.status == DtoStatus::Success && c.flags.contains(CompletionFlags::SUPPRESS) {
            return;
        }
        let signal = if c.flags.contains(CompletionFlags::UNSIGNALLED) {
            Signal::Unsignalled
        } else {
            Signal::Normal
        };
        let ep = self.ep;
        let dto = move || DtoCompletion {
            ep,
            cookie: c.cookie,
            status: c.status,
            transferred_length: if c.status == DtoStatus::Success {
                c.transferred_length
            } else {
                0
            },
            operation: c.op,
            rmr_context: 0,
        };
        let route = self.current();
        let evd = if recv { &route.recv } else { &route.request };
        match evd {
            Some(evd) => evd.push_dto(dto, signal, me),
            None => tracing::warn!(
                ep = self.ep.0,
                ?c,
                "completion for an EP without an EVD: dropped"
            ),
        }
    }
}
