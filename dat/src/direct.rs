//! The transport's per-call entries of an endpoint ([`EpPost`]) and of an EVD ([`EvdPoll`]),
//! called directly where the provider is built in.
//!
//! Every post and every dequeue calls one of them. Through a trait object that is an indirect
//! call and its return, the costliest control transfer under emulation (18 ns against 0.2
//! for an addition in the Soft-RoCE guest, BENCHMARKS.md session 17), and it keeps the
//! provider's code out of the caller's: the request is built in memory for it and read back.
//! An entry of a provider compiled into this crate (verbs, feature `verbs`) is downcast once,
//! when the facade takes it, and then called by its type, inlined into the post or the
//! dequeue; any other provider's stays a trait object. The outcome is the same either way:
//! the same trait method runs.

use std::sync::Arc;

use dat_core::DatResult;
use dat_core::mem::{Segment, one_segment};
use dat_core::provider::{EpPost, EvdPoll, PostOp, WorkRequest};
use dat_core::types::{CompletionFlags, Cookie};

use crate::dyn_arc::DynArc;

/// An endpoint's post entry ([`dat_core::provider::Transport::ep_post`]).
pub(crate) enum PostTo {
    /// The verbs provider's endpoint.
    #[cfg(feature = "verbs")]
    Verbs(Arc<dat_provider_verbs::direct::Ep>),
    /// Any other provider's.
    Dyn(DynArc<dyn EpPost>),
}

impl PostTo {
    /// The entry `to`, by its type where that is a built-in provider's.
    pub(crate) fn new(to: Arc<dyn EpPost>) -> PostTo {
        #[cfg(feature = "verbs")]
        {
            let any: Arc<dyn std::any::Any + Send + Sync> = to.clone();
            if let Ok(ep) = any.downcast() {
                return PostTo::Verbs(ep);
            }
        }
        PostTo::Dyn(DynArc::new(to))
    }

    /// [`EpPost::lends`].
    pub(crate) fn lends(&self) -> bool {
        match self {
            #[cfg(feature = "verbs")]
            PostTo::Verbs(ep) => ep.lends(),
            PostTo::Dyn(to) => to.lends(),
        }
    }

    /// [`EpPost::post`].
    ///
    /// # Errors
    /// As [`dat_core::provider::Transport::post`].
    #[inline(always)]
    pub(crate) fn post(&self, wr: WorkRequest) -> DatResult<()> {
        match self {
            #[cfg(feature = "verbs")]
            PostTo::Verbs(ep) => ep.post(wr),
            PostTo::Dyn(to) => to.post(wr),
        }
    }

    /// [`EpPost::post_lent`] of the one-segment request of these parts, `seg` lent for the
    /// call: verbs reads them where they lie; another provider gets a request holding a
    /// copy of the segment (its own memory reference; no provider but verbs lends today).
    ///
    /// # Errors
    /// As [`dat_core::provider::Transport::post`].
    #[inline(always)]
    pub(crate) fn post_lent_one(
        &self,
        op: PostOp,
        seg: &Segment,
        (cookie, flags): (Cookie, CompletionFlags),
    ) -> DatResult<()> {
        match self {
            #[cfg(feature = "verbs")]
            PostTo::Verbs(ep) => ep.post_lent_one(op, seg, cookie, flags),
            PostTo::Dyn(to) => to.post_lent(&WorkRequest {
                op,
                segs: one_segment(seg.clone()),
                cookie,
                flags,
            }),
        }
    }

    /// [`EpPost::post_lent`].
    ///
    /// # Errors
    /// As [`dat_core::provider::Transport::post`].
    #[inline(always)]
    pub(crate) fn post_lent(&self, wr: &WorkRequest) -> DatResult<()> {
        match self {
            #[cfg(feature = "verbs")]
            PostTo::Verbs(ep) => ep.post_lent(wr),
            PostTo::Dyn(to) => to.post_lent(wr),
        }
    }
}

/// An EVD's poller ([`dat_core::provider::Transport::evd_poll`]).
pub(crate) enum PollOf {
    /// The verbs provider's.
    #[cfg(feature = "verbs")]
    Verbs(Arc<dat_provider_verbs::direct::EvdPoller>),
    /// Any other provider's.
    Dyn(DynArc<dyn EvdPoll>),
}

impl PollOf {
    /// The poller `poll`, by its type where that is a built-in provider's.
    pub(crate) fn new(poll: Arc<dyn EvdPoll>) -> PollOf {
        #[cfg(feature = "verbs")]
        {
            let any: Arc<dyn std::any::Any + Send + Sync> = poll.clone();
            if let Ok(p) = any.downcast() {
                return PollOf::Verbs(p);
            }
        }
        PollOf::Dyn(DynArc::new(poll))
    }

    /// [`EvdPoll::progress`].
    #[inline(always)]
    pub(crate) fn progress(&self) -> bool {
        match self {
            #[cfg(feature = "verbs")]
            PollOf::Verbs(p) => p.progress(),
            PollOf::Dyn(p) => p.progress(),
        }
    }

    /// [`EvdPoll::active`].
    #[inline(always)]
    pub(crate) fn active(&self) {
        match self {
            #[cfg(feature = "verbs")]
            PollOf::Verbs(p) => p.active(),
            PollOf::Dyn(p) => p.active(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A provider's entries that count their calls.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl EpPost for Counting {
        fn post(&self, _wr: WorkRequest) -> DatResult<()> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    impl EvdPoll for Counting {
        fn progress(&self) -> bool {
            self.0.fetch_add(10, Ordering::Relaxed);
            true
        }
    }

    #[test]
    fn another_providers_entries_stay_trait_objects_and_are_called() {
        let c = Arc::new(Counting::default());
        let to = PostTo::new(c.clone());
        assert!(matches!(to, PostTo::Dyn(_)));
        assert!(!to.lends());
        let wr = WorkRequest {
            op: dat_core::provider::PostOp::Send,
            segs: dat_core::mem::SegList::new(),
            cookie: Cookie(7),
            flags: CompletionFlags::empty(),
        };
        to.post_lent(&wr).unwrap();
        to.post(wr).unwrap();
        let poll = PollOf::new(c.clone());
        assert!(matches!(poll, PollOf::Dyn(_)));
        assert!(poll.progress());
        poll.active();
        assert_eq!(c.0.load(Ordering::Relaxed), 12);
    }

    /// The verbs provider's endpoint entry (no device needed: without a QP a send completes
    /// as flushed) is taken by its type, and a post through it reaches it.
    #[cfg(feature = "verbs")]
    #[test]
    fn a_verbs_endpoint_is_called_by_its_type() {
        use std::sync::Mutex;

        use dat_core::ep::attr::{EpLimits, default_attr};
        use dat_core::provider::{CmFact, Completion, EpConfig, EpUpcalls};
        use dat_core::types::{DtoStatus, EpId};

        #[derive(Default)]
        struct Seen(Mutex<Vec<Completion>>);
        impl EpUpcalls for Seen {
            fn completion(&self, c: Completion) {
                self.0.lock().unwrap().push(c);
            }
            fn cm(&self, _fact: CmFact) {}
            fn retired(&self, _n: u32) {}
        }

        let limits = EpLimits {
            max_message_size: 1 << 20,
            max_rdma_size: 1 << 20,
            max_dtos: 16,
            max_iov: 4,
            max_rdma_read_in: 1,
            max_rdma_read_out: 1,
            max_rdma_read_iov: 4,
            max_rdma_write_iov: 4,
        };
        let cfg = EpConfig {
            pz: None,
            recv_evd: None,
            request_evd: None,
            connect_evd: None,
            srq: None,
            attr: default_attr(&limits),
        };
        let seen = Arc::new(Seen::default());
        let ep = dat_provider_verbs::direct::Ep::new(EpId(1), cfg, seen.clone(), 0);
        let to = PostTo::new(Arc::new(ep));
        assert!(matches!(to, PostTo::Verbs(_)));
        assert!(to.lends());
        let wr = WorkRequest {
            op: dat_core::provider::PostOp::Send,
            segs: dat_core::mem::SegList::new(),
            cookie: Cookie(9),
            flags: CompletionFlags::empty(),
        };
        to.post_lent(&wr).unwrap();
        let got = seen.0.lock().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].cookie, Cookie(9));
        assert_eq!(got[0].status, DtoStatus::Flushed);
    }
}
