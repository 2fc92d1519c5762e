//! Send and receive: scatter/gather, zero length, many outstanding, ordering, completion
//! flags, cookies and lengths, shared receive queues.

use dat::types::{CloseFlags, CompletionFlags, Cookie, DtoOp, DtoStatus, EpAttr, EventNumber};
use dat::{AsyncHandle, DatError, Ep, EpState, EpStatus, EventData};

use crate::Outcome;
use crate::harness::{
    Side, assert_empty, deep_pair, expect_completion, expect_conn, expect_dto, pair, pattern,
    post_recv, post_send, read,
};
use crate::target::Target;

/// One send into one receive: data, cookies, lengths, operations, EPs on both sides.
pub fn send_recv_basic(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let data = pattern(1000, 1);
    p.a.lmr.write(0, &data).unwrap();
    post_recv(&p.b, &p.b.ep, 4096, 2048, 0xB0B);
    post_send(&p.a, &p.a.ep, 0, 1000, 0xA11CE);
    expect_completion(
        &p.a.req,
        &p.a.ep,
        0xA11CE,
        DtoStatus::Success,
        DtoOp::Send,
        1000,
    );
    expect_completion(
        &p.b.recv,
        &p.b.ep,
        0xB0B,
        DtoStatus::Success,
        DtoOp::Receive,
        1000,
    );
    assert_eq!(read(&p.b.lmr, 4096, 1000), data);
    assert_eq!(
        read(&p.b.lmr, 5096, 8),
        vec![0u8; 8],
        "nothing beyond the message"
    );
    Outcome::Pass
}

/// A three-segment gather send arrives as one message.
pub fn send_gather(t: &dyn Target) -> Outcome {
    let p = pair(t);
    p.a.lmr.write(10, b"abc").unwrap();
    p.a.lmr.write(500, b"defgh").unwrap();
    p.a.lmr.write(9000, b"ij").unwrap();
    post_recv(&p.b, &p.b.ep, 0, 64, 1);
    p.a.ep
        .post_send(
            &[
                p.a.lmr.triplet(10, 3),
                p.a.lmr.triplet(500, 5),
                p.a.lmr.triplet(9000, 2),
            ],
            Cookie(2),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(&p.a.req, &p.a.ep, 2, DtoStatus::Success, DtoOp::Send, 10);
    expect_completion(
        &p.b.recv,
        &p.b.ep,
        1,
        DtoStatus::Success,
        DtoOp::Receive,
        10,
    );
    assert_eq!(read(&p.b.lmr, 0, 10), b"abcdefghij");
    Outcome::Pass
}

/// A receive scatters one message over three segments in order.
pub fn recv_scatter(t: &dyn Target) -> Outcome {
    let p = pair(t);
    p.a.lmr.write(0, b"0123456789").unwrap();
    p.b.ep
        .post_recv(
            &[
                p.b.lmr.triplet(100, 2),
                p.b.lmr.triplet(7, 3),
                p.b.lmr.triplet(3000, 16),
            ],
            Cookie(1),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    post_send(&p.a, &p.a.ep, 0, 10, 2);
    expect_completion(
        &p.b.recv,
        &p.b.ep,
        1,
        DtoStatus::Success,
        DtoOp::Receive,
        10,
    );
    assert_eq!(read(&p.b.lmr, 100, 2), b"01");
    assert_eq!(read(&p.b.lmr, 7, 3), b"234");
    assert_eq!(read(&p.b.lmr, 3000, 5), b"56789");
    Outcome::Pass
}

/// Zero-length sends (one empty segment, and no segment at all) complete with length 0.
pub fn send_zero_length(t: &dyn Target) -> Outcome {
    let p = pair(t);
    p.b.lmr.write(0, b"keep").unwrap();
    post_recv(&p.b, &p.b.ep, 0, 64, 1);
    post_recv(&p.b, &p.b.ep, 0, 64, 2);
    post_send(&p.a, &p.a.ep, 0, 0, 3);
    p.a.ep
        .post_send(&[], Cookie(4), CompletionFlags::DEFAULT)
        .unwrap();
    expect_completion(&p.a.req, &p.a.ep, 3, DtoStatus::Success, DtoOp::Send, 0);
    expect_completion(&p.a.req, &p.a.ep, 4, DtoStatus::Success, DtoOp::Send, 0);
    expect_completion(&p.b.recv, &p.b.ep, 1, DtoStatus::Success, DtoOp::Receive, 0);
    expect_completion(&p.b.recv, &p.b.ep, 2, DtoStatus::Success, DtoOp::Receive, 0);
    assert_eq!(read(&p.b.lmr, 0, 4), b"keep");
    Outcome::Pass
}

/// 200 outstanding sends and receives complete in posting order with intact data.
pub fn many_outstanding_ordered(t: &dyn Target) -> Outcome {
    let n = 200u64;
    let p = deep_pair(t, 256);
    for i in 0..n {
        post_recv(&p.b, &p.b.ep, i * 256, 256, 1000 + i);
    }
    for i in 0..n {
        p.a.lmr.write((i * 256) as usize, &pattern(100, i)).unwrap();
        post_send(&p.a, &p.a.ep, i * 256, 100, i);
    }
    for i in 0..n {
        expect_completion(&p.a.req, &p.a.ep, i, DtoStatus::Success, DtoOp::Send, 100);
        expect_completion(
            &p.b.recv,
            &p.b.ep,
            1000 + i,
            DtoStatus::Success,
            DtoOp::Receive,
            100,
        );
    }
    for i in 0..n {
        assert_eq!(
            read(&p.b.lmr, (i * 256) as usize, 100),
            pattern(100, i),
            "message {i}"
        );
    }
    Outcome::Pass
}

/// Receives are consumed in the order they were posted, whatever their size.
pub fn recvs_consumed_fifo(t: &dyn Target) -> Outcome {
    let p = pair(t);
    post_recv(&p.b, &p.b.ep, 0, 1024, 1);
    post_recv(&p.b, &p.b.ep, 2048, 64, 2);
    p.a.lmr.write(0, b"first").unwrap();
    p.a.lmr.write(100, b"second").unwrap();
    post_send(&p.a, &p.a.ep, 0, 5, 10);
    post_send(&p.a, &p.a.ep, 100, 6, 11);
    expect_completion(&p.b.recv, &p.b.ep, 1, DtoStatus::Success, DtoOp::Receive, 5);
    expect_completion(&p.b.recv, &p.b.ep, 2, DtoStatus::Success, DtoOp::Receive, 6);
    assert_eq!(read(&p.b.lmr, 0, 5), b"first");
    assert_eq!(read(&p.b.lmr, 2048, 6), b"second");
    Outcome::Pass
}

/// A send posted before the receive waits for it (nothing is dropped).
pub fn send_before_recv_waits(t: &dyn Target) -> Outcome {
    let p = pair(t);
    p.a.lmr.write(0, b"early").unwrap();
    post_send(&p.a, &p.a.ep, 0, 5, 1);
    assert_empty(&p.b.recv);
    post_recv(&p.b, &p.b.ep, 0, 64, 2);
    expect_completion(&p.b.recv, &p.b.ep, 2, DtoStatus::Success, DtoOp::Receive, 5);
    expect_completion(&p.a.req, &p.a.ep, 1, DtoStatus::Success, DtoOp::Send, 5);
    assert_eq!(read(&p.b.lmr, 0, 5), b"early");
    Outcome::Pass
}

/// Both directions at once.
pub fn bidirectional(t: &dyn Target) -> Outcome {
    let p = pair(t);
    p.a.lmr.write(0, b"a->b").unwrap();
    p.b.lmr.write(0, b"b->a").unwrap();
    post_recv(&p.a, &p.a.ep, 1000, 64, 1);
    post_recv(&p.b, &p.b.ep, 1000, 64, 2);
    post_send(&p.a, &p.a.ep, 0, 4, 3);
    post_send(&p.b, &p.b.ep, 0, 4, 4);
    expect_completion(&p.a.recv, &p.a.ep, 1, DtoStatus::Success, DtoOp::Receive, 4);
    expect_completion(&p.b.recv, &p.b.ep, 2, DtoStatus::Success, DtoOp::Receive, 4);
    expect_completion(&p.a.req, &p.a.ep, 3, DtoStatus::Success, DtoOp::Send, 4);
    expect_completion(&p.b.req, &p.b.ep, 4, DtoStatus::Success, DtoOp::Send, 4);
    assert_eq!(read(&p.a.lmr, 1000, 4), b"b->a");
    assert_eq!(read(&p.b.lmr, 1000, 4), b"a->b");
    Outcome::Pass
}

/// Cookies are returned verbatim, all 64 bits.
pub fn cookies_verbatim(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let cookies = [0u64, u64::MAX, 0x8000_0000_0000_0001, 0xDEAD_BEEF_0BAD_F00D];
    for c in cookies {
        post_recv(&p.b, &p.b.ep, 0, 64, c ^ 1);
        post_send(&p.a, &p.a.ep, 0, 1, c);
    }
    for c in cookies {
        expect_completion(&p.a.req, &p.a.ep, c, DtoStatus::Success, DtoOp::Send, 1);
        expect_completion(
            &p.b.recv,
            &p.b.ep,
            c ^ 1,
            DtoStatus::Success,
            DtoOp::Receive,
            1,
        );
    }
    Outcome::Pass
}

/// A send longer than the receive: `DAT_DTO_ERR_LOCAL_LENGTH` at the receiver, an error at
/// the sender, the connection broken on both sides.
pub fn send_longer_than_recv(t: &dyn Target) -> Outcome {
    let p = pair(t);
    post_recv(&p.b, &p.b.ep, 0, 8, 1);
    post_send(&p.a, &p.a.ep, 0, 9, 2);
    let r = expect_dto(&p.b.recv);
    assert_eq!(
        (r.cookie, r.status, r.transferred_length),
        (Cookie(1), DtoStatus::LocalLength, 0)
    );
    let s = expect_dto(&p.a.req);
    assert_eq!(s.cookie, Cookie(2));
    assert_ne!(s.status, DtoStatus::Success);
    assert_eq!(s.transferred_length, 0);
    expect_conn(&p.a.conn, EventNumber::Broken, &p.a.ep);
    expect_conn(&p.b.conn, EventNumber::Broken, &p.b.ep);
    assert_eq!(p.a.ep.state(), Ok(EpState::Disconnected));
    Outcome::Pass
}

/// `DAT_COMPLETION_SUPPRESS_FLAG`: a successful send reports nothing; the receive does.
pub fn suppress_flag(t: &dyn Target) -> Outcome {
    let p = pair(t);
    post_recv(&p.b, &p.b.ep, 0, 64, 1);
    post_recv(&p.b, &p.b.ep, 0, 64, 2);
    p.a.ep
        .post_send(
            &[p.a.lmr.triplet(0, 4)],
            Cookie(10),
            CompletionFlags::SUPPRESS,
        )
        .unwrap();
    post_send(&p.a, &p.a.ep, 0, 4, 11);
    expect_completion(&p.b.recv, &p.b.ep, 1, DtoStatus::Success, DtoOp::Receive, 4);
    expect_completion(&p.b.recv, &p.b.ep, 2, DtoStatus::Success, DtoOp::Receive, 4);
    // Only the second send reports.
    expect_completion(&p.a.req, &p.a.ep, 11, DtoStatus::Success, DtoOp::Send, 4);
    assert_empty(&p.a.req);
    Outcome::Pass
}

/// `dat_ep_get_status`: a post counts as outstanding until its completion is queued.
/// Requests posted with SUPPRESS (no event ever comes for them) count out when they
/// retire, which the completion of a request posted after them proves; receives flushed by
/// a disconnect count out as their flushes are queued.
pub fn status_counts_outstanding(t: &dyn Target) -> Outcome {
    // More than the run of requests verbs posts without a work completion of their own (7).
    let n = 20u64;
    let p = deep_pair(t, 64);
    let idle = |state| EpStatus {
        state,
        recvs: 0,
        requests: 0,
    };
    assert_eq!(p.a.ep.status(), Ok(idle(EpState::Connected)));
    for i in 0..=n {
        post_recv(&p.b, &p.b.ep, i * 64, 64, 100 + i);
    }
    let st = p.b.ep.status().unwrap();
    assert_eq!((st.recvs, st.requests), (n + 1, 0));
    assert!(!st.recv_idle() && st.request_idle());

    // Sends: n suppressed, then one reported.
    for i in 0..n {
        p.a.ep
            .post_send(
                &[p.a.lmr.triplet(0, 4)],
                Cookie(i),
                CompletionFlags::SUPPRESS,
            )
            .unwrap();
    }
    post_send(&p.a, &p.a.ep, 0, 4, 999);
    let st = p.a.ep.status().unwrap();
    assert!(st.requests <= n + 1 && st.recvs == 0, "{st:?}");
    for i in 0..=n {
        expect_completion(
            &p.b.recv,
            &p.b.ep,
            100 + i,
            DtoStatus::Success,
            DtoOp::Receive,
            4,
        );
    }
    assert_eq!(p.b.ep.status(), Ok(idle(EpState::Connected)));
    expect_completion(&p.a.req, &p.a.ep, 999, DtoStatus::Success, DtoOp::Send, 4);
    assert_eq!(
        p.a.ep.status(),
        Ok(idle(EpState::Connected)),
        "the suppressed sends retired before the last one"
    );

    // RDMA writes, no receive involved: n suppressed, then a read.
    for i in 0..n {
        p.a.ep
            .post_rdma_write(
                &[p.a.lmr.triplet(0, 8)],
                Cookie(i),
                p.b.lmr.rmr_triplet(i * 8, 8),
                CompletionFlags::SUPPRESS,
            )
            .unwrap();
    }
    p.a.ep
        .post_rdma_read(
            &[p.a.lmr.triplet(4096, 8)],
            Cookie(998),
            p.b.lmr.rmr_triplet(0, 8),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(
        &p.a.req,
        &p.a.ep,
        998,
        DtoStatus::Success,
        DtoOp::RdmaRead,
        8,
    );
    assert_empty(&p.a.req);
    assert_eq!(p.a.ep.status(), Ok(idle(EpState::Connected)));

    // Receives flushed by the peer's disconnect.
    post_recv(&p.b, &p.b.ep, 0, 64, 1);
    post_recv(&p.b, &p.b.ep, 64, 64, 2);
    assert_eq!(p.b.ep.status().map(|s| s.recvs), Ok(2));
    p.a.ep.disconnect(CloseFlags::Graceful).unwrap();
    expect_conn(&p.b.conn, EventNumber::Disconnected, &p.b.ep);
    for c in [1, 2] {
        expect_completion(&p.b.recv, &p.b.ep, c, DtoStatus::Flushed, DtoOp::Receive, 0);
    }
    assert_eq!(p.b.ep.status(), Ok(idle(EpState::Disconnected)));
    Outcome::Pass
}

/// Flag argument codes: unknown bits, SUPPRESS on a receive, UNSIGNALLED unless the EP's
/// completion flags allow it.
pub fn completion_flag_codes(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let unknown = CompletionFlags::from_bits_retain(0x1000);
    let iov = [p.a.lmr.triplet(0, 4)];
    assert_eq!(
        p.a.ep.post_send(&iov, Cookie(1), unknown),
        Err(DatError::invalid_arg(5))
    );
    assert_eq!(
        p.a.ep.post_recv(&iov, Cookie(1), CompletionFlags::SUPPRESS),
        Err(DatError::invalid_arg(5))
    );
    assert_eq!(
        p.a.ep
            .post_rdma_write(&iov, Cookie(1), p.b.lmr.rmr_triplet(0, 4), unknown),
        Err(DatError::invalid_arg(6))
    );
    let allowed = p.a.ep.query().unwrap().config.attr.request_completion_flags;
    if !allowed.contains(CompletionFlags::UNSIGNALLED) {
        assert_eq!(
            p.a.ep
                .post_send(&iov, Cookie(1), CompletionFlags::UNSIGNALLED),
            Err(DatError::invalid_arg(5))
        );
    }
    assert_empty(&p.a.req);
    assert_eq!(p.a.ep.state(), Ok(EpState::Connected));
    Outcome::Pass
}

/// More segments than `max_request_iov` / `max_recv_iov` is `INVALID_ARG2`.
pub fn too_many_segments(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let attr = p.a.ep.query().unwrap().config.attr;
    let seg = p.a.lmr.triplet(0, 1);
    let req = vec![seg; attr.max_request_iov as usize + 1];
    let rcv = vec![seg; attr.max_recv_iov as usize + 1];
    assert_eq!(
        p.a.ep.post_send(&req, Cookie(1), CompletionFlags::DEFAULT),
        Err(DatError::invalid_arg(2))
    );
    assert_eq!(
        p.a.ep.post_recv(&rcv, Cookie(1), CompletionFlags::DEFAULT),
        Err(DatError::invalid_arg(2))
    );
    let ok = vec![seg; attr.max_request_iov as usize];
    post_recv(&p.b, &p.b.ep, 0, 4096, 7);
    p.a.ep
        .post_send(&ok, Cookie(8), CompletionFlags::DEFAULT)
        .unwrap();
    expect_completion(
        &p.a.req,
        &p.a.ep,
        8,
        DtoStatus::Success,
        DtoOp::Send,
        attr.max_request_iov,
    );
    Outcome::Pass
}

/// A receive still posted when the peer disconnects is flushed with its cookie; a send
/// posted afterwards completes as flushed.
pub fn disconnect_flushes_recvs(t: &dyn Target) -> Outcome {
    let p = pair(t);
    post_recv(&p.b, &p.b.ep, 0, 64, 77);
    post_recv(&p.b, &p.b.ep, 64, 64, 78);
    p.a.ep.disconnect(CloseFlags::Graceful).unwrap();
    expect_conn(&p.b.conn, EventNumber::Disconnected, &p.b.ep);
    expect_completion(
        &p.b.recv,
        &p.b.ep,
        77,
        DtoStatus::Flushed,
        DtoOp::Receive,
        0,
    );
    expect_completion(
        &p.b.recv,
        &p.b.ep,
        78,
        DtoStatus::Flushed,
        DtoOp::Receive,
        0,
    );
    post_send(&p.b, &p.b.ep, 0, 4, 79);
    expect_completion(&p.b.req, &p.b.ep, 79, DtoStatus::Flushed, DtoOp::Send, 0);
    Outcome::Pass
}

/// Receives pre-posted while UNCONNECTED are kept by the connection and used.
pub fn preposted_recv_used(t: &dyn Target) -> Outcome {
    let (a, b) = crate::harness::sides(t);
    post_recv(&b, &b.ep, 0, 64, 5);
    b.ep.reset().unwrap();
    let p = crate::harness::connect(t, a, b);
    p.a.lmr.write(0, b"pre").unwrap();
    post_send(&p.a, &p.a.ep, 0, 3, 6);
    expect_completion(&p.b.recv, &p.b.ep, 5, DtoStatus::Success, DtoOp::Receive, 3);
    assert_eq!(read(&p.b.lmr, 0, 3), b"pre");
    Outcome::Pass
}

/// A fresh pair of sides, an SRQ on `b` and `b`'s listening PSP; a skip if the provider
/// does not advertise SRQ support.
pub(crate) struct SrqSides {
    pub(crate) a: Side,
    pub(crate) b: Side,
    pub(crate) srq: dat::Srq,
    psp: dat::Sp,
    /// Attributes for EPs on the SRQ (no receive queue of their own).
    attr: EpAttr,
}

impl SrqSides {
    pub(crate) fn new(t: &dyn Target, max_recv_dtos: u32) -> Result<SrqSides, Outcome> {
        let (ia_a, ia_b) = t.open_pair();
        if !ia_b.provider_attr().srq_supported {
            return Err(Outcome::Skip(
                "provider does not advertise SRQ support".into(),
            ));
        }
        let a = Side::new(ia_a);
        let b = Side::new(ia_b);
        let srq =
            b.ia.create_srq(
                &b.pz,
                dat::SrqAttr {
                    max_recv_dtos,
                    max_recv_iov: 1,
                    low_watermark: 0,
                },
            )
            .unwrap();
        let mut attr = b.ep.query().unwrap().config.attr;
        attr.max_recv_dtos = 0;
        let psp = b.psp(t);
        Ok(SrqSides {
            a,
            b,
            srq,
            psp,
            attr,
        })
    }

    /// Connects `ea` (of `a`) to `eb` (of `b`) through the PSP.
    pub(crate) fn connect(&self, ea: &Ep, eb: &Ep) {
        crate::harness::connect_ep(ea, &self.b.addr(), self.psp.conn_qual(), b"");
        crate::harness::expect_cr(&self.b.ia, &self.b.cr, &self.psp)
            .accept(Some(eb), b"")
            .unwrap();
        expect_conn(&self.a.conn, EventNumber::Established, ea);
        expect_conn(&self.b.conn, EventNumber::Established, eb);
    }

    /// A fresh EP of `a` connected to a fresh EP of `b` on the SRQ: `(a's, b's)`.
    pub(crate) fn connect_srq_ep(&self) -> (Ep, Ep) {
        let eb = self
            .b
            .ia
            .create_ep(&dat::EpParams {
                srq: Some(&self.srq),
                attr: Some(&self.attr),
                ..self.b.ep_params()
            })
            .unwrap();
        let ea = self.a.another_ep();
        self.connect(&ea, &eb);
        (ea, eb)
    }
}

/// Two EPs on one SRQ: each receive completes on the EP that got the message.
pub fn srq_shared_receives(t: &dyn Target) -> Outcome {
    let s = match SrqSides::new(t, 16) {
        Ok(s) => s,
        Err(skip) => return skip,
    };
    let (a, b, srq) = (&s.a, &s.b, &s.srq);
    let pairs = [s.connect_srq_ep(), s.connect_srq_ep()];
    srq.post_recv(&[b.lmr.triplet(0, 64)], Cookie(1)).unwrap();
    srq.post_recv(&[b.lmr.triplet(64, 64)], Cookie(2)).unwrap();
    a.lmr.write(0, b"second-ep").unwrap();
    post_send(a, &pairs[1].0, 0, 9, 3);
    let c = expect_dto(&b.recv);
    assert_eq!(
        (c.ep, c.cookie, c.status, c.transferred_length),
        (pairs[1].1.id(), Cookie(1), DtoStatus::Success, 9)
    );
    a.lmr.write(0, b"first").unwrap();
    post_send(a, &pairs[0].0, 0, 5, 4);
    let c = expect_dto(&b.recv);
    assert_eq!(
        (c.ep, c.cookie, c.transferred_length),
        (pairs[0].1.id(), Cookie(2), 5)
    );
    assert_eq!(read(&b.lmr, 0, 9), b"second-ep");
    assert_eq!(read(&b.lmr, 64, 5), b"first");
    Outcome::Pass
}

/// An EP on an SRQ that leaves its connection is reported on the IA's async EVD after its
/// DISCONNECTED event, whichever side disconnects: `DAT_ASYNC_ERROR_EP_BROKEN` for that EP,
/// once (decision 26 of `dat_core::ep::state`, what `dtestsrq` waits for before freeing).
/// EPs with their own receive queue get no asynchronous event.
pub fn srq_ep_disconnect_async_event(t: &dyn Target) -> Outcome {
    let s = match SrqSides::new(t, 4) {
        Ok(s) => s,
        Err(skip) => return skip,
    };
    let (a, b, srq) = (&s.a, &s.b, &s.srq);
    s.connect(&a.ep, &b.ep);
    let (ea0, eb0) = s.connect_srq_ep();
    let (ea1, eb1) = s.connect_srq_ep();
    // The first SRQ EP consumes a buffer of the SRQ before its connection ends.
    srq.post_recv(&[b.lmr.triplet(0, 64)], Cookie(1)).unwrap();
    post_send(a, &ea0, 0, 4, 2);
    expect_completion(&b.recv, &eb0, 1, DtoStatus::Success, DtoOp::Receive, 4);
    expect_completion(&a.req, &ea0, 2, DtoStatus::Success, DtoOp::Send, 4);

    // EPs with their own receive queues: DISCONNECTED only.
    a.ep.disconnect(CloseFlags::Graceful).unwrap();
    expect_conn(&a.conn, EventNumber::Disconnected, &a.ep);
    expect_conn(&b.conn, EventNumber::Disconnected, &b.ep);
    // The peer disconnects the first SRQ EP.
    ea0.disconnect(CloseFlags::Graceful).unwrap();
    expect_conn(&a.conn, EventNumber::Disconnected, &ea0);
    expect_conn(&b.conn, EventNumber::Disconnected, &eb0);
    expect_async_ep_broken(&b.ia, &eb0);
    // The second SRQ EP disconnects itself.
    eb1.disconnect(CloseFlags::Graceful).unwrap();
    expect_conn(&b.conn, EventNumber::Disconnected, &eb1);
    expect_conn(&a.conn, EventNumber::Disconnected, &ea1);
    expect_async_ep_broken(&b.ia, &eb1);
    // One event per SRQ EP; none for the others (posted long before, were there one).
    assert_empty(&b.ia.async_evd());
    assert_empty(&a.ia.async_evd());
    // Told, the consumer frees the SRQ EPs, and then the SRQ.
    eb0.free().unwrap();
    eb1.free().unwrap();
    srq.free().unwrap();
    Outcome::Pass
}

/// The next event of `ia`'s async EVD must be `DAT_ASYNC_ERROR_EP_BROKEN` for `ep`.
fn expect_async_ep_broken(ia: &dat::Ia, ep: &Ep) {
    let ev = crate::harness::next_event(&ia.async_evd());
    assert_eq!(ev.number, EventNumber::AsyncEpBroken, "{ev:?}");
    assert!(
        matches!(ev.data, EventData::Async { handle: AsyncHandle::Ep(id), reason: 0 } if id == ep.id()),
        "{ev:?}"
    );
}

/// LMRs freed, and their handles dropped, while receives name them: `dat_lmr_free` succeeds,
/// the memory stays allocated while the provider may still write into it, the first
/// receive completes with the message, the second is flushed by the peer's disconnect, and
/// the memory goes once the endpoint is freed. The receives are posted from a thread that
/// has ended since, so nothing but the posts holds the memory.
///
/// Software providers only: on verbs the free deregisters the memory region, and the
/// adapter then refuses the receive (a local protection error), as OFA dapl's does.
pub fn lmr_freed_with_posts_in_flight(t: &dyn Target) -> Outcome {
    use dat::Buffer;
    use dat::types::{MemPriv, VaType};
    use std::sync::{Arc, Weak};

    let p = pair(t);
    if p.a.ia.provider_attr().provider_name == "verbs" {
        return Outcome::Skip("verbs: a freed LMR's memory region is deregistered".into());
    }
    let bufs: Vec<Arc<Buffer>> = (0..2)
        .map(|_| Arc::new(Buffer::alloc(64, 64).unwrap()))
        .collect();
    let weak: Vec<Weak<Buffer>> = bufs.iter().map(Arc::downgrade).collect();
    let lmrs: Vec<dat::Lmr> = bufs
        .into_iter()
        .map(|b| p.a.pz.register(b, MemPriv::ALL, VaType::Va).unwrap())
        .collect();
    std::thread::scope(|s| {
        s.spawn(|| {
            for (cookie, l) in (1..).zip(&lmrs) {
                let flags = CompletionFlags::DEFAULT;
                p.a.ep
                    .post_recv(&[l.triplet(0, 64)], Cookie(cookie), flags)
                    .unwrap();
            }
        });
    });
    for l in lmrs {
        assert_eq!(l.free(), Ok(()));
    }
    assert!(
        weak.iter().all(|w| w.upgrade().is_some()),
        "memory named by outstanding receives stays allocated"
    );
    p.b.lmr.write(0, b"inflight").unwrap();
    post_send(&p.b, &p.b.ep, 0, 8, 7);
    expect_completion(&p.b.req, &p.b.ep, 7, DtoStatus::Success, DtoOp::Send, 8);
    expect_completion(&p.a.recv, &p.a.ep, 1, DtoStatus::Success, DtoOp::Receive, 8);
    p.b.ep.disconnect(CloseFlags::Graceful).unwrap();
    expect_conn(&p.a.conn, EventNumber::Disconnected, &p.a.ep);
    expect_completion(&p.a.recv, &p.a.ep, 2, DtoStatus::Flushed, DtoOp::Receive, 0);
    assert_empty(&p.a.recv);
    p.a.ep.free().unwrap();
    // The provider drops the requests it held by the time it has reported them and freed the
    // endpoint, or soon after on its own thread.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while weak.iter().any(|w| w.upgrade().is_some()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the memory of freed LMRs is released once no post names it"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Outcome::Pass
}
