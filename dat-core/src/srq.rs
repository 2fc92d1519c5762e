//! Shared receive queues: the low-watermark rule, and how a software provider reports the
//! buffers its endpoints take.
//!
//! # The low watermark (`dat_srq_set_lw`, reference 6.6)
//!
//! A consumer that refills its SRQ on demand arms a low watermark and waits on the IA's async
//! EVD for `DAT_SRQ_LOW_WATERMARK_EVENT`. [`LowWatermark`] is the whole rule, shared by every
//! provider; the facade owns one per SRQ and feeds it facts:
//!
//! 1. **What is counted**: *available* buffers, posted with `dat_srq_post_recv` and not yet
//!    taken by an endpoint. A buffer is taken when a message arrives for it (InfiniBand
//!    consumes the WQE then); a software provider reports it with the receive's completion
//!    ([`SrqFact::Taken`], through [`CountTakes`]), which for a message in several pieces is
//!    when its last piece arrived.
//! 2. **When it fires**: once, when the available count is *below* the watermark
//!    (`available < low_watermark`) — on the take that brings it there, or at once in
//!    `dat_srq_set_lw` (or `dat_srq_create`) if it is already there (the seed: "This can occur
//!    during the current call or when an associated EP takes a buffer from the SRQ").
//! 3. **Disarmed after firing** until the next `dat_srq_set_lw`, whatever the count does in
//!    between (the seed: "generated only once per setting of the low watermark"). Setting
//!    the same value again re-arms.
//! 4. **0 (`DAT_SRQ_LW_DEFAULT`) never fires**: it disarms.
//! 5. **The event** goes to the IA's async EVD: [`LOW_WATERMARK_EVENT`] with the SRQ as
//!    `dat_handle` and reason `DAT_SRQ_LOW_WATERMARK_EVENT` (2). The header has no event
//!    number of its own for it; we use the number OFA gives InfiniBand's affiliated
//!    asynchronous events (`DAT_ASYNC_ERROR_EP_BROKEN`, decision 26 of `crate::ep::state`),
//!    and the handle and reason say which object and what happened.
//! 6. **A transport that watches the limit itself** (verbs: `ibv_modify_srq` with
//!    `IBV_SRQ_LIMIT`, then `IBV_EVENT_SRQ_LIMIT_REACHED`) says so when the watermark is set
//!    (`Transport::set_srq_lw` returns true) and reports [`SrqFact::LimitReached`]; the rule
//!    then takes the transport's word for the count ([`LowWatermark::set_delegated`]). The
//!    device decides whether a watermark already undercut when it is set fires at once or at
//!    the next take (Soft-RoCE: at the next take).

use std::sync::Arc;

use crate::provider::{CmFact, Completion, EpUpcalls, IaUpcalls, SrqFact};
use crate::types::{DtoOp, EventNumber, SrqId};

/// The event number of `DAT_SRQ_LOW_WATERMARK_EVENT` (rule 5 of the module docs).
pub const LOW_WATERMARK_EVENT: EventNumber = EventNumber::AsyncEpBroken;

/// The low-watermark state of one SRQ (the rule of the module docs). Pure: the caller posts
/// the event when a method returns true.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LowWatermark {
    /// Buffers posted and not taken (as far as the facade was told).
    available: u64,
    /// The watermark in force (0: none).
    lw: u32,
    /// The event has not fired since the watermark was set.
    armed: bool,
    /// The transport watches the count (rule 6).
    delegated: bool,
}

impl LowWatermark {
    /// No watermark, nothing posted.
    pub const fn new() -> LowWatermark {
        LowWatermark {
            available: 0,
            lw: 0,
            armed: false,
            delegated: false,
        }
    }

    /// Buffers posted and not yet taken, as counted from [`LowWatermark::posted`] and
    /// [`LowWatermark::taken`] (a transport that watches the limit itself reports no takes).
    pub fn available(&self) -> u64 {
        self.available
    }

    /// The watermark in force (0: none).
    pub fn low_watermark(&self) -> u32 {
        self.lw
    }

    /// True while the event may still fire.
    pub fn is_armed(&self) -> bool {
        self.armed
    }

    /// `n` buffers were posted. Posting never fires.
    pub fn posted(&mut self, n: u32) {
        self.available += u64::from(n);
    }

    /// `n` buffers counted by [`LowWatermark::posted`] never reached the queue (the post
    /// failed).
    pub fn unposted(&mut self, n: u32) {
        self.available = self.available.saturating_sub(u64::from(n));
    }

    /// `n` buffers were taken by endpoints; true if the event fires now.
    pub fn taken(&mut self, n: u32) -> bool {
        self.available = self.available.saturating_sub(u64::from(n));
        !self.delegated && self.check()
    }

    /// Sets (and arms) the watermark, the facade counting; true if the event fires at once
    /// because the count is already below it. 0 disarms.
    pub fn set(&mut self, lw: u32) -> bool {
        self.lw = lw;
        self.armed = lw > 0;
        self.delegated = false;
        self.check()
    }

    /// Sets (and arms) a watermark the transport watches itself: only
    /// [`LowWatermark::limit_reached`] fires it. 0 disarms.
    pub fn set_delegated(&mut self, lw: u32) {
        self.lw = lw;
        self.armed = lw > 0;
        self.delegated = true;
    }

    /// The transport reports its limit reached; true if the event fires (false when disarmed:
    /// a report that crossed a `dat_srq_set_lw` of 0).
    pub fn limit_reached(&mut self) -> bool {
        std::mem::replace(&mut self.armed, false)
    }

    fn check(&mut self) -> bool {
        if self.armed && self.available < u64::from(self.lw) {
            self.armed = false;
            return true;
        }
        false
    }
}

/// The upcalls of an endpoint that takes its receives from an SRQ, for a software provider:
/// every receive completion is one buffer taken from the SRQ, reported as
/// [`SrqFact::Taken`] to the IA before the completion itself goes on (so the low-watermark
/// event is on the async EVD when the consumer sees the receive). A provider wraps the
/// facade's upcalls with [`CountTakes::wrap`] in `create_ep`; verbs, whose device counts,
/// does not.
pub struct CountTakes {
    inner: Arc<dyn EpUpcalls>,
    srq: SrqId,
    ia: Arc<dyn IaUpcalls>,
}

impl CountTakes {
    /// `upcalls` itself for an endpoint without SRQ, else `upcalls` counting its receives.
    pub fn wrap(
        upcalls: Arc<dyn EpUpcalls>,
        srq: Option<SrqId>,
        ia: &Arc<dyn IaUpcalls>,
    ) -> Arc<dyn EpUpcalls> {
        match srq {
            None => upcalls,
            Some(srq) => Arc::new(CountTakes {
                inner: upcalls,
                srq,
                ia: ia.clone(),
            }),
        }
    }
}

impl EpUpcalls for CountTakes {
    fn completion(&self, c: Completion) {
        if c.op == DtoOp::Receive {
            self.ia.srq(self.srq, SrqFact::Taken(1));
        }
        self.inner.completion(c);
    }

    fn cm(&self, fact: CmFact) {
        self.inner.cm(fact);
    }

    fn retired(&self, n: u32) {
        self.inner.retired(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::AsyncFact;
    use crate::types::{CompletionFlags, Cookie, DtoStatus};
    use std::sync::Mutex;

    #[test]
    fn fires_once_on_the_take_that_goes_below() {
        let mut w = LowWatermark::new();
        w.posted(4);
        assert!(!w.set(2));
        assert!(!w.taken(1)); // 3 left
        assert!(!w.taken(1)); // 2 left: not below 2
        assert!(w.taken(1)); // 1 left: below
        assert!(!w.is_armed());
        assert!(!w.taken(1)); // 0 left: disarmed
        assert_eq!(w.available(), 0);
    }

    #[test]
    fn rearming_fires_again_and_at_once_when_already_below() {
        let mut w = LowWatermark::new();
        w.posted(3);
        assert!(!w.set(3));
        assert!(w.taken(1));
        // Already below: setting fires during the call.
        assert!(w.set(3));
        assert!(!w.taken(1));
        // Refilled above, re-armed, drained again.
        w.posted(4); // 5
        assert!(!w.set(3));
        assert!(!w.taken(2)); // 3
        assert!(w.taken(1)); // 2
    }

    #[test]
    fn zero_never_fires_and_disarms() {
        let mut w = LowWatermark::new();
        w.posted(2);
        assert!(!w.set(0));
        assert!(!w.taken(2));
        assert!(!w.taken(1));
        w.posted(2);
        assert!(!w.set(2));
        assert!(!w.set(0)); // disarmed before anything was taken
        assert!(!w.taken(2));
        assert!(!w.limit_reached());
    }

    #[test]
    fn an_unposted_buffer_is_not_available() {
        let mut w = LowWatermark::new();
        w.posted(2);
        w.unposted(1);
        assert_eq!(w.available(), 1);
        assert!(w.set(2));
    }

    #[test]
    fn takes_never_underflow() {
        let mut w = LowWatermark::new();
        assert!(!w.taken(3));
        assert_eq!(w.available(), 0);
        assert!(w.set(1));
    }

    #[test]
    fn a_delegated_watermark_fires_only_on_the_transports_word() {
        let mut w = LowWatermark::new();
        w.set_delegated(5);
        assert!(w.is_armed());
        assert!(!w.taken(1));
        assert!(w.limit_reached());
        assert!(!w.limit_reached(), "once per setting");
        w.set_delegated(5);
        assert!(w.limit_reached());
        // Back to counting.
        w.posted(1);
        assert!(w.set(2));
    }

    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl EpUpcalls for Log {
        fn completion(&self, c: Completion) {
            self.0
                .lock()
                .unwrap()
                .push(format!("completion {:?}", c.op));
        }
        fn cm(&self, fact: CmFact) {
            self.0.lock().unwrap().push(format!("cm {fact:?}"));
        }
        fn retired(&self, n: u32) {
            self.0.lock().unwrap().push(format!("retired {n}"));
        }
    }

    impl IaUpcalls for Log {
        fn async_error(&self, fact: AsyncFact) {
            self.0.lock().unwrap().push(format!("async {fact:?}"));
        }
        fn srq(&self, srq: SrqId, fact: SrqFact) {
            self.0
                .lock()
                .unwrap()
                .push(format!("srq {} {fact:?}", srq.0));
        }
    }

    fn completion(op: DtoOp) -> Completion {
        Completion {
            cookie: Cookie(1),
            status: DtoStatus::Success,
            transferred_length: 0,
            op,
            flags: CompletionFlags::DEFAULT,
        }
    }

    #[test]
    fn count_takes_reports_receives_before_forwarding_them() {
        let log = Arc::new(Log::default());
        let ia: Arc<dyn IaUpcalls> = log.clone();
        let up = CountTakes::wrap(log.clone(), Some(SrqId(7)), &ia);
        up.completion(completion(DtoOp::Send));
        up.completion(completion(DtoOp::Receive));
        up.cm(CmFact::Disconnected);
        up.retired(3);
        assert_eq!(
            *log.0.lock().unwrap(),
            [
                "completion Send",
                "srq 7 Taken(1)",
                "completion Receive",
                "cm Disconnected",
                "retired 3"
            ]
        );
    }

    #[test]
    fn count_takes_leaves_an_endpoint_without_srq_alone() {
        let log = Arc::new(Log::default());
        let ia: Arc<dyn IaUpcalls> = log.clone();
        let plain: Arc<dyn EpUpcalls> = log.clone();
        let up = CountTakes::wrap(plain.clone(), None, &ia);
        assert!(Arc::ptr_eq(&up, &plain));
    }
}
