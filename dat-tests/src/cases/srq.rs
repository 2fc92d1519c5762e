//! Shared receive queue watermarks: `dat_srq_set_lw` and `DAT_SRQ_LOW_WATERMARK_EVENT` on the
//! IA's async EVD (the rule is documented in `dat_core::srq`).

use dat::types::{Cookie, DtoOp, DtoStatus};
use dat::{AsyncHandle, Ep, EventData};

use crate::Outcome;
use crate::cases::dto::SrqSides;
use crate::harness::{assert_empty, expect_completion, next_event, post_send};
use crate::target::Target;

/// `DAT_SRQ_LOW_WATERMARK_EVENT`.
const LOW_WATERMARK: i32 = 2;

/// Posts `n` receives of 64 bytes to the SRQ, cookies from `cookie`.
fn fill(s: &SrqSides, n: u64, cookie: u64) {
    for i in 0..n {
        s.srq
            .post_recv(
                &[s.b.lmr.triplet(64 * (cookie + i), 64)],
                Cookie(cookie + i),
            )
            .unwrap();
    }
}

/// One send from `ea` taken by `eb` from the SRQ; both completions are consumed.
fn consume_one(s: &SrqSides, ea: &Ep, eb: &Ep, cookie: u64) {
    post_send(&s.a, ea, 0, 8, 1000 + cookie);
    expect_completion(&s.b.recv, eb, cookie, DtoStatus::Success, DtoOp::Receive, 8);
    expect_completion(
        &s.a.req,
        ea,
        1000 + cookie,
        DtoStatus::Success,
        DtoOp::Send,
        8,
    );
}

/// The next async event of `s.b` must be the low-watermark event of the SRQ.
fn expect_low_watermark(s: &SrqSides) {
    let ev = next_event(&s.b.ia.async_evd());
    assert_eq!(ev.number, dat_core::srq::LOW_WATERMARK_EVENT, "{ev:?}");
    assert!(
        matches!(
            ev.data,
            EventData::Async { handle: AsyncHandle::Srq(id), reason: LOW_WATERMARK }
                if id == s.srq.id()
        ),
        "{ev:?}"
    );
}

/// With 4 buffers posted and a low watermark of 2, the take that leaves 1 fires
/// `DAT_SRQ_LOW_WATERMARK_EVENT` (async EVD, the SRQ as handle, reason 2), exactly once: the
/// next take is quiet until `dat_srq_set_lw` re-arms it. A watermark of 0
/// (`DAT_SRQ_LW_DEFAULT`) never fires.
pub fn srq_low_watermark_once_per_setting(t: &dyn Target) -> Outcome {
    let s = match SrqSides::new(t, 8) {
        Ok(s) => s,
        Err(skip) => return skip,
    };
    let (ea, eb) = s.connect_srq_ep();
    let async_evd = s.b.ia.async_evd();
    fill(&s, 4, 1);
    s.srq.set_lw(2).unwrap();
    assert_eq!(s.srq.query().unwrap().attr.low_watermark, 2);
    assert_empty(&async_evd);
    consume_one(&s, &ea, &eb, 1); // 3 left
    consume_one(&s, &ea, &eb, 2); // 2 left: not below
    assert_empty(&async_evd);
    consume_one(&s, &ea, &eb, 3); // 1 left: below
    expect_low_watermark(&s);
    consume_one(&s, &ea, &eb, 4); // 0 left: disarmed
    assert_empty(&async_evd);

    // Refilled and re-armed: fires again once below.
    fill(&s, 3, 5);
    s.srq.set_lw(2).unwrap();
    assert_empty(&async_evd);
    consume_one(&s, &ea, &eb, 5); // 2 left
    assert_empty(&async_evd);
    consume_one(&s, &ea, &eb, 6); // 1 left
    expect_low_watermark(&s);

    // 0 disarms: draining the queue is quiet.
    s.srq.set_lw(0).unwrap();
    consume_one(&s, &ea, &eb, 7);
    fill(&s, 1, 8);
    consume_one(&s, &ea, &eb, 8);
    assert_empty(&async_evd);
    assert_empty(&s.a.ia.async_evd());
    Outcome::Pass
}

/// A low watermark set when fewer buffers than it are available fires during the call (the
/// seed of `dat_srq_set_lw`), once; so does one given at `dat_srq_create` on the empty queue.
pub fn srq_low_watermark_set_below_fires_at_once(t: &dyn Target) -> Outcome {
    let s = match SrqSides::new(t, 8) {
        Ok(s) => s,
        Err(skip) => return skip,
    };
    if s.b.ia.provider_attr().provider_name == "verbs" {
        // The device counts (rule 6 of `dat_core::srq`): Soft-RoCE fires at the next take.
        return Outcome::Skip("verbs: the device decides when an undercut limit fires".into());
    }
    let async_evd = s.b.ia.async_evd();
    fill(&s, 2, 1);
    s.srq.set_lw(3).unwrap();
    expect_low_watermark(&s);
    assert_empty(&async_evd);
    let (ea, eb) = s.connect_srq_ep();
    consume_one(&s, &ea, &eb, 1);
    assert_empty(&async_evd);

    // At creation: the empty queue is below at once.
    let q =
        s.b.ia
            .create_srq(
                &s.b.pz,
                dat::SrqAttr {
                    max_recv_dtos: 4,
                    max_recv_iov: 1,
                    low_watermark: 1,
                },
            )
            .unwrap();
    let ev = next_event(&async_evd);
    assert!(
        matches!(ev.data, EventData::Async { handle: AsyncHandle::Srq(id), reason: LOW_WATERMARK } if id == q.id()),
        "{ev:?}"
    );
    assert_eq!(q.query().unwrap().attr.low_watermark, 1);
    q.free().unwrap();
    assert_empty(&async_evd);
    Outcome::Pass
}
