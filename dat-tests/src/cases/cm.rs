//! Connection management: accept/reject with private data, request contents, service point
//! lifecycles, connect to nobody, timeouts, argument codes.

use std::time::Duration;

use dat::types::{
    CloseFlags, ConnQual, DtoOp, DtoStatus, EvdFlags, EventNumber, PspFlags, Qos, Timeout,
};
use dat::{ConnectFlags, DatError, EpModify, EpParams, EpState, ErrorType, Subtype};

use crate::Outcome;
use crate::harness::{
    CONNECT_TIMEOUT, Side, assert_empty, connect_ep, connect_ep_err, connect_more,
    expect_completion, expect_conn, expect_cr, pair, post_recv, post_send, sides,
};
use crate::target::Target;

/// Private data travels both ways; the request and both EPs report the right addresses and
/// qualifiers.
pub fn accept_private_data_both_ways(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"hello from a");
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    let q = cr.query().unwrap();
    assert_eq!(&*q.private_data, b"hello from a");
    assert_eq!(q.remote_address.ip(), a.addr().ip());
    assert_eq!(q.conn_qual, psp.conn_qual());
    assert_eq!((q.ep, q.sp), (None, psp.id()));
    assert_eq!(cr.ep(), None);
    cr.accept(Some(&b.ep), b"welcome from b").unwrap();
    assert_eq!(
        &*expect_conn(&a.conn, EventNumber::Established, &a.ep),
        b"welcome from b"
    );
    assert_eq!(&*expect_conn(&b.conn, EventNumber::Established, &b.ep), b"");
    let qa = a.ep.query().unwrap();
    assert_eq!(qa.state, EpState::Connected);
    assert_eq!(qa.remote_address, Some(b.addr()));
    assert_eq!(qa.remote_qual, Some(psp.conn_qual()));
    let qb = b.ep.query().unwrap();
    assert_eq!(qb.local_qual, Some(psp.conn_qual()));
    assert_eq!(qb.remote_address.map(|r| r.ip()), Some(a.addr().ip()));
    Outcome::Pass
}

/// Reject with private data: `PEER_REJECTED` carrying it, DISCONNECTED; after reset the EP
/// connects again.
pub fn reject_private_data_then_reconnect(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"please");
    expect_cr(&b.ia, &b.cr, &psp).reject(b"go away").unwrap();
    assert_eq!(
        &*expect_conn(&a.conn, EventNumber::PeerRejected, &a.ep),
        b"go away"
    );
    assert_eq!(a.ep.state(), Ok(EpState::Disconnected));
    assert_eq!(b.ep.state(), Ok(EpState::Unconnected), "untouched");
    assert_empty(&b.conn);
    a.ep.reset().unwrap();
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"again");
    expect_cr(&b.ia, &b.cr, &psp)
        .accept(Some(&b.ep), b"")
        .unwrap();
    expect_conn(&a.conn, EventNumber::Established, &a.ep);
    expect_conn(&b.conn, EventNumber::Established, &b.ep);
    Outcome::Pass
}

/// Reject without private data delivers an empty `PEER_REJECTED`.
pub fn reject_empty_private_data(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"");
    expect_cr(&b.ia, &b.cr, &psp).reject(b"").unwrap();
    assert!(expect_conn(&a.conn, EventNumber::PeerRejected, &a.ep).is_empty());
    Outcome::Pass
}

/// Private data of exactly the provider's maximum travels intact; one byte more is refused
/// with the argument's code by connect, accept and reject.
pub fn private_data_limits(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let max = a.ia.provider_attr().max_private_data_size as usize;
    let big = crate::harness::pattern(max, 7);
    let over = vec![1u8; max + 1];
    assert_eq!(
        a.ep.connect(
            b.addr(),
            t.qual(),
            CONNECT_TIMEOUT,
            &over,
            Qos::BestEffort,
            ConnectFlags::Default
        ),
        Err(DatError::invalid_arg(5))
    );
    assert_eq!(a.ep.state(), Ok(EpState::Unconnected));
    let psp = b.psp(t);
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), &big);
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    assert_eq!(&*cr.query().unwrap().private_data, &big[..]);
    assert_eq!(cr.accept(Some(&b.ep), &over), Err(DatError::invalid_arg(3)));
    assert_eq!(cr.reject(&over), Err(DatError::invalid_arg(2)));
    assert_eq!(b.ep.state(), Ok(EpState::Unconnected));
    let back = crate::harness::pattern(max, 8);
    cr.accept(Some(&b.ep), &back).unwrap();
    assert_eq!(
        &*expect_conn(&a.conn, EventNumber::Established, &a.ep),
        &back[..]
    );
    Outcome::Pass
}

/// Connect to a qualifier nobody listens on: `NON_PEER_REJECTED`, DISCONNECTED; the passive
/// IA sees nothing.
pub fn connect_to_nobody(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    let nobody = ConnQual(psp.conn_qual().0 + 1_000_000);
    connect_ep(&a.ep, &b.addr(), nobody, b"");
    expect_conn(&a.conn, EventNumber::NonPeerRejected, &a.ep);
    assert_eq!(a.ep.state(), Ok(EpState::Disconnected));
    assert_empty(&b.cr);
    Outcome::Pass
}

/// Connect to an address nobody answers on: `UNREACHABLE`, DISCONNECTED.
pub fn connect_unreachable(t: &dyn Target) -> Outcome {
    let Some(addr) = t.unreachable_address() else {
        return Outcome::Skip("target names no unreachable address (DAT_TEST_UNREACHABLE)".into());
    };
    let (a, _b) = sides(t);
    match a.ep.connect(
        addr,
        t.qual(),
        CONNECT_TIMEOUT,
        b"",
        Qos::BestEffort,
        ConnectFlags::Default,
    ) {
        Ok(()) => {
            let ev = crate::harness::next_event(&a.conn);
            assert!(
                matches!(
                    ev.number,
                    EventNumber::Unreachable | EventNumber::NonPeerRejected
                ),
                "{ev:?}"
            );
            assert_eq!(ev.ep(), Some(a.ep.id()));
            assert_eq!(a.ep.state(), Ok(EpState::Disconnected));
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorType::InvalidAddress, "{e}");
            assert_eq!(a.ep.state(), Ok(EpState::Unconnected));
        }
    }
    Outcome::Pass
}

/// Nobody answers within the consumer's timeout: `TIMED_OUT`, DISCONNECTED; a late accept
/// does not connect.
pub fn connect_timeout(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    // Long enough for the request to reach B before it expires on a loaded machine (with
    // 200 ms a stall could end the connect before B ever saw the request).
    a.ep.connect(
        b.addr(),
        psp.conn_qual(),
        Timeout(3_000_000),
        b"",
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .unwrap();
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    t.let_time_pass(&a.ia, Duration::from_millis(3_200));
    expect_conn(&a.conn, EventNumber::TimedOut, &a.ep);
    assert_eq!(a.ep.state(), Ok(EpState::Disconnected));
    // The late accept cannot establish anything on the active side.
    if cr.accept(Some(&b.ep), b"").is_ok() {
        let ev = crate::harness::next_event(&b.conn);
        assert!(
            matches!(
                ev.number,
                EventNumber::AcceptCompletionError | EventNumber::Disconnected
            ),
            "{ev:?}"
        );
        crate::harness::wait_state(&b.ia, &b.ep, EpState::Disconnected);
    }
    assert_eq!(a.ep.state(), Ok(EpState::Disconnected));
    Outcome::Pass
}

/// Synchronous connect argument codes: zero timeout, QoS, flags; the EP stays UNCONNECTED.
pub fn connect_argument_codes(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let q = t.qual();
    let c = |timeout, qos, flags| a.ep.connect(b.addr(), q, timeout, b"", qos, flags);
    assert_eq!(
        c(Timeout::ZERO, Qos::BestEffort, ConnectFlags::Default),
        Err(DatError::invalid_arg(4))
    );
    let model = Err(DatError::new(
        ErrorType::ModelNotSupported,
        Subtype::NoSubtype,
    ));
    for qos in [Qos::HighThroughput, Qos::LowLatency] {
        assert_eq!(c(CONNECT_TIMEOUT, qos, ConnectFlags::Default), model);
    }
    for f in [
        ConnectFlags::MultipathRequested,
        ConnectFlags::MultipathRequired,
    ] {
        assert_eq!(c(CONNECT_TIMEOUT, Qos::BestEffort, f), model);
    }
    assert_eq!(a.ep.state(), Ok(EpState::Unconnected));
    assert_empty(&a.conn);
    Outcome::Pass
}

/// An EP without a PZ or without a connect EVD is `INVALID_STATE | EP_NOTREADY`.
pub fn connect_not_ready(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let no_pz =
        a.ia.create_ep(&EpParams {
            pz: None,
            ..a.ep_params()
        })
        .unwrap();
    let no_conn =
        a.ia.create_ep(&EpParams {
            connect_evd: None,
            ..a.ep_params()
        })
        .unwrap();
    let nr = DatError::invalid_state(Subtype::StateEpNotReady);
    connect_ep_err(&no_pz, &b.addr(), t.qual(), nr);
    connect_ep_err(&no_conn, &b.addr(), t.qual(), nr);
    assert_eq!(no_pz.state(), Ok(EpState::Unconnected));
    Outcome::Pass
}

/// A request answered once cannot be answered again; its handle is stale.
pub fn cr_answered_once(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"");
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    cr.accept(Some(&b.ep), b"").unwrap();
    let stale = DatError::invalid_handle(Subtype::InvalidHandleCr);
    assert_eq!(cr.accept(Some(&b.ep), b""), Err(stale));
    assert_eq!(cr.reject(b""), Err(stale));
    assert_eq!(cr.query().unwrap_err(), stale);
    assert_eq!(cr.handoff(psp.conn_qual()), Err(stale));
    assert!(b.ia.cr(cr.id()).is_none());
    expect_conn(&a.conn, EventNumber::Established, &a.ep);
    Outcome::Pass
}

/// Accept naming the wrong EP form: `None` for a consumer-PSP request, `Some` for an RSP's;
/// an EP without a connect EVD.
pub fn accept_wrong_ep_form(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"");
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    let bad_ep = DatError::invalid_handle(Subtype::InvalidHandleEp);
    assert_eq!(cr.accept(None, b""), Err(bad_ep));
    let no_conn =
        b.ia.create_ep(&EpParams {
            connect_evd: None,
            ..b.ep_params()
        })
        .unwrap();
    assert_eq!(cr.accept(Some(&no_conn), b""), Err(bad_ep));
    assert_eq!(no_conn.state(), Ok(EpState::Unconnected));
    // An RSP request has its own EP.
    let rsp_ep = b.another_ep();
    let rsp = b.ia.create_rsp(t.qual(), &rsp_ep, &b.cr).unwrap();
    let a2 = a.another_ep();
    connect_ep(&a2, &b.addr(), rsp.conn_qual(), b"");
    let cr2 = expect_cr(&b.ia, &b.cr, &rsp);
    assert_eq!(cr2.accept(Some(&b.ep), b""), Err(bad_ep));
    cr2.accept(None, b"").unwrap();
    expect_conn(&a.conn, EventNumber::Established, &a2);
    expect_conn(&b.conn, EventNumber::Established, &rsp_ep);
    cr.reject(b"").unwrap();
    Outcome::Pass
}

/// Requests delivered before `dat_psp_free` stay valid; after it nobody listens.
pub fn psp_free_keeps_delivered_requests(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    let qual = psp.conn_qual();
    connect_ep(&a.ep, &b.addr(), qual, b"");
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    psp.free().unwrap();
    cr.accept(Some(&b.ep), b"").unwrap();
    expect_conn(&a.conn, EventNumber::Established, &a.ep);
    expect_conn(&b.conn, EventNumber::Established, &b.ep);
    let late = a.another_ep();
    connect_ep(&late, &b.addr(), qual, b"");
    expect_conn(&a.conn, EventNumber::NonPeerRejected, &late);
    assert_empty(&b.cr);
    Outcome::Pass
}

/// One PSP serves many requests, each accepted on its own EP.
pub fn psp_many_requests(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    let mut eps = Vec::new();
    for _ in 0..4 {
        eps.push(connect_more(&a, &b, &psp));
    }
    for (ea, eb) in &eps {
        assert_eq!(ea.state(), Ok(EpState::Connected));
        assert_eq!(eb.state(), Ok(EpState::Connected));
    }
    Outcome::Pass
}

/// An RSP takes one request only: a second connect finds nobody listening.
pub fn rsp_single_request(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let rsp = b.ia.create_rsp(t.qual(), &b.ep, &b.cr).unwrap();
    connect_ep(&a.ep, &b.addr(), rsp.conn_qual(), b"first");
    let cr = expect_cr(&b.ia, &b.cr, &rsp);
    assert_eq!(&*cr.query().unwrap().private_data, b"first");
    assert_eq!(cr.query().unwrap().ep, Some(b.ep.id()));
    let second = a.another_ep();
    connect_ep(&second, &b.addr(), rsp.conn_qual(), b"second");
    expect_conn(&a.conn, EventNumber::NonPeerRejected, &second);
    cr.accept(None, b"rsp").unwrap();
    assert_eq!(
        &*expect_conn(&a.conn, EventNumber::Established, &a.ep),
        b"rsp"
    );
    expect_conn(&b.conn, EventNumber::Established, &b.ep);
    Outcome::Pass
}

/// Reject of an RSP request returns the EP to UNCONNECTED; the requester gets
/// `PEER_REJECTED` with the data.
pub fn rsp_reject_returns_unconnected(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let rsp = b.ia.create_rsp(t.qual(), &b.ep, &b.cr).unwrap();
    connect_ep(&a.ep, &b.addr(), rsp.conn_qual(), b"");
    expect_cr(&b.ia, &b.cr, &rsp).reject(b"no").unwrap();
    assert_eq!(b.ep.state(), Ok(EpState::Unconnected));
    assert_eq!(
        &*expect_conn(&a.conn, EventNumber::PeerRejected, &a.ep),
        b"no"
    );
    Outcome::Pass
}

/// A provider-flag PSP creates an EP per request; reject destroys it.
pub fn psp_provider_reject_destroys_ep(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    if !b.ia.provider_attr().psp_provider_flag_supported {
        return Outcome::Skip("provider does not advertise DAT_PSP_PROVIDER_FLAG".into());
    }
    let psp =
        b.ia.create_psp(t.qual(), &b.cr, PspFlags::Provider)
            .unwrap();
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"");
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    let ep = cr.ep().expect("provider EP");
    assert_eq!(ep.state(), Ok(EpState::TentativeConnectionPending));
    assert_eq!(
        cr.accept(Some(&b.ep), b""),
        Err(DatError::invalid_handle(Subtype::InvalidHandleEp))
    );
    cr.reject(b"tentative").unwrap();
    assert_eq!(
        ep.state(),
        Err(DatError::invalid_handle(Subtype::InvalidHandleEp))
    );
    assert_eq!(
        &*expect_conn(&a.conn, EventNumber::PeerRejected, &a.ep),
        b"tentative"
    );
    Outcome::Pass
}

/// Accept of a provider-created EP: it is TENTATIVE_CONNECTION_PENDING without a PZ or EVDs,
/// so `accept(None)` is refused until `dat_ep_modify` gives it a PZ and EVDs; then it
/// connects, carries data both ways and disconnects like any EP.
pub fn psp_provider_accept(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    if !b.ia.provider_attr().psp_provider_flag_supported {
        return Outcome::Skip("provider does not advertise DAT_PSP_PROVIDER_FLAG".into());
    }
    let psp =
        b.ia.create_psp(t.qual(), &b.cr, PspFlags::Provider)
            .unwrap();
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"to the provider ep");
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    assert_eq!(&*cr.query().unwrap().private_data, b"to the provider ep");
    let ep = cr.ep().expect("provider EP");
    assert_eq!(ep.state(), Ok(EpState::TentativeConnectionPending));
    assert_eq!(
        cr.accept(None, b""),
        Err(DatError::invalid_handle(Subtype::InvalidHandleEp)),
        "no PZ or connect EVD yet"
    );
    let conn = b.ia.create_evd(8, EvdFlags::CONNECTION, None).unwrap();
    let dto = b.ia.create_evd(16, EvdFlags::DTO, None).unwrap();
    // The EP has no DTO EVDs, so its queue depths are 0: they come with the EVDs.
    let attr = b.deep_attr(4);
    ep.modify(&EpModify {
        pz: Some(&b.pz),
        recv_evd: Some(&dto),
        request_evd: Some(&dto),
        connect_evd: Some(&conn),
        attr: Some(&attr),
    })
    .unwrap();
    assert_eq!(ep.state(), Ok(EpState::TentativeConnectionPending));
    // A receive posted before the accept is kept for the connection.
    post_recv(&b, &ep, 0, 64, 1);
    cr.accept(None, b"from the provider ep").unwrap();
    assert_eq!(
        &*expect_conn(&a.conn, EventNumber::Established, &a.ep),
        b"from the provider ep"
    );
    assert_eq!(&*expect_conn(&conn, EventNumber::Established, &ep), b"");
    assert_eq!(ep.state(), Ok(EpState::Connected));
    // Data both ways on the provider-created EP.
    a.lmr.write(0, b"ping over a provider ep").unwrap();
    post_send(&a, &a.ep, 0, 23, 2);
    expect_completion(&a.req, &a.ep, 2, DtoStatus::Success, DtoOp::Send, 23);
    expect_completion(&dto, &ep, 1, DtoStatus::Success, DtoOp::Receive, 23);
    let mut got = [0u8; 23];
    b.lmr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"ping over a provider ep");
    post_recv(&a, &a.ep, 100, 16, 3);
    b.lmr.write(200, b"pong").unwrap();
    post_send(&b, &ep, 200, 4, 4);
    expect_completion(&dto, &ep, 4, DtoStatus::Success, DtoOp::Send, 4);
    expect_completion(&a.recv, &a.ep, 3, DtoStatus::Success, DtoOp::Receive, 4);
    let mut got = [0u8; 4];
    a.lmr.read(100, &mut got).unwrap();
    assert_eq!(&got, b"pong");
    ep.disconnect(CloseFlags::Abrupt).unwrap();
    expect_conn(&conn, EventNumber::Disconnected, &ep);
    expect_conn(&a.conn, EventNumber::Disconnected, &a.ep);
    Outcome::Pass
}

/// Handoff moves a request to another consumer PSP of the IA, with a new CR event there.
pub fn cr_handoff(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    let other_evd = b.ia.create_evd(4, dat::types::EvdFlags::CR, None).unwrap();
    let other =
        b.ia.create_psp(t.qual(), &other_evd, PspFlags::Consumer)
            .unwrap();
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"moved");
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    let unknown = ConnQual(other.conn_qual().0 + 1_000_000);
    assert_eq!(cr.handoff(unknown), Err(DatError::invalid_arg(2)));
    cr.handoff(other.conn_qual()).unwrap();
    assert_eq!(
        cr.query().unwrap_err(),
        DatError::invalid_handle(Subtype::InvalidHandleCr)
    );
    let moved = expect_cr(&b.ia, &other_evd, &other);
    let q = moved.query().unwrap();
    assert_eq!(
        (&*q.private_data, q.conn_qual, q.sp),
        (&b"moved"[..], other.conn_qual(), other.id())
    );
    moved.accept(Some(&b.ep), b"").unwrap();
    expect_conn(&a.conn, EventNumber::Established, &a.ep);
    expect_conn(&b.conn, EventNumber::Established, &b.ep);
    Outcome::Pass
}

/// A qualifier chosen by `dat_psp_create_any` is connectable.
pub fn psp_any_connectable(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.ia.create_psp_any(&b.cr, PspFlags::Consumer).unwrap();
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"any");
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    cr.accept(Some(&b.ep), b"").unwrap();
    expect_conn(&a.conn, EventNumber::Established, &a.ep);
    Outcome::Pass
}

/// Qualifiers far beyond 16 bits (dapltest's limit_psp uses `0xaffab1e + n`) are served
/// like any other. A connect to another large qualifier nobody listens on is
/// `NON_PEER_REJECTED` and never reaches the service point, even where both share a
/// transport address (the tcp provider folds both onto the port of this case's own
/// qualifier: 64512 ports from 1024 up).
pub fn psp_large_qualifier(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let own = t.qual().0;
    let big = ConnQual(own.checked_sub(1024).unwrap_or(own) + 64_512 * 2_860);
    let psp = b.ia.create_psp(big, &b.cr, PspFlags::Consumer).unwrap();
    assert_eq!(psp.conn_qual(), big);
    let other = ConnQual(big.0 + 64_512);
    connect_ep(&a.ep, &b.addr(), other, b"other");
    expect_conn(&a.conn, EventNumber::NonPeerRejected, &a.ep);
    assert_empty(&b.cr);
    let a2 = a.another_ep();
    connect_ep(&a2, &b.addr(), big, b"big");
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    let q = cr.query().unwrap();
    assert_eq!((q.conn_qual, &*q.private_data), (big, &b"big"[..]));
    cr.accept(Some(&b.ep), b"").unwrap();
    expect_conn(&a.conn, EventNumber::Established, &a2);
    expect_conn(&b.conn, EventNumber::Established, &b.ep);
    Outcome::Pass
}

/// The peer's graceful disconnect reaches this side as `DISCONNECTED` for the right EP.
pub fn passive_side_disconnects(t: &dyn Target) -> Outcome {
    let p = pair(t);
    p.b.ep.disconnect(CloseFlags::Graceful).unwrap();
    expect_conn(&p.b.conn, EventNumber::Disconnected, &p.b.ep);
    expect_conn(&p.a.conn, EventNumber::Disconnected, &p.a.ep);
    assert_eq!(p.a.ep.state(), Ok(EpState::Disconnected));
    Outcome::Pass
}

/// After disconnect and reset, both EPs connect again on the same PSP.
pub fn reconnect_after_reset(t: &dyn Target) -> Outcome {
    let p = pair(t);
    crate::harness::disconnect_pair(&p);
    p.a.ep.reset().unwrap();
    p.b.ep.reset().unwrap();
    connect_ep(&p.a.ep, &p.b.addr(), p.qual, b"round two");
    let cr = expect_cr(&p.b.ia, &p.b.cr, &p.psp);
    assert_eq!(&*cr.query().unwrap().private_data, b"round two");
    cr.accept(Some(&p.b.ep), b"").unwrap();
    expect_conn(&p.a.conn, EventNumber::Established, &p.a.ep);
    expect_conn(&p.b.conn, EventNumber::Established, &p.b.ep);
    crate::harness::post_recv(&p.b, &p.b.ep, 0, 16, 1);
    crate::harness::post_send(&p.a, &p.a.ep, 0, 16, 2);
    crate::harness::expect_dto(&p.b.recv);
    Outcome::Pass
}

/// `dat_ep_dup_connect`: a second connection to the same remote end, with its own private
/// data; argument codes.
pub fn dup_connect(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let fresh = p.a.another_ep();
    assert_eq!(
        fresh.dup_connect(&p.a.ep, Timeout::ZERO, b"", Qos::BestEffort),
        Err(DatError::invalid_arg(3))
    );
    assert_eq!(
        fresh.dup_connect(&p.a.ep, CONNECT_TIMEOUT, b"", Qos::LowLatency),
        Err(DatError::new(
            ErrorType::ModelNotSupported,
            Subtype::NoSubtype
        ))
    );
    assert_eq!(fresh.state(), Ok(EpState::Unconnected));
    fresh
        .dup_connect(&p.a.ep, CONNECT_TIMEOUT, b"dup", Qos::BestEffort)
        .unwrap();
    assert_eq!(fresh.state(), Ok(EpState::ActiveConnectionPending));
    let cr = expect_cr(&p.b.ia, &p.b.cr, &p.psp);
    assert_eq!(&*cr.query().unwrap().private_data, b"dup");
    let eb = p.b.another_ep();
    cr.accept(Some(&eb), b"dup-ok").unwrap();
    assert_eq!(
        &*expect_conn(&p.a.conn, EventNumber::Established, &fresh),
        b"dup-ok"
    );
    expect_conn(&p.b.conn, EventNumber::Established, &eb);
    let q = fresh.query().unwrap();
    assert_eq!(
        (q.remote_address, q.remote_qual),
        (Some(p.b.addr()), Some(p.qual))
    );
    Outcome::Pass
}

/// The side objects are independent: two sides of one IA connect to each other.
pub fn loopback_same_ia(t: &dyn Target) -> Outcome {
    let (ia, _other) = t.open_pair();
    let a = Side::new(ia.clone());
    let b = Side::new(ia);
    let p = crate::harness::connect(t, a, b);
    crate::harness::disconnect_pair(&p);
    Outcome::Pass
}

/// Connections made in a burst, as `dtestcm` makes them: the passive side sees every
/// connection's ESTABLISHED before the DISCONNECTED of a connection the requester closed only
/// after it had seen all its own ESTABLISHED. IB's CM delivers events in that causal order, and
/// dtestcm's server counts on it (it takes its first N connection events as the N
/// establishments, then frees an EP per later event).
pub fn established_precede_later_disconnects(t: &dyn Target) -> Outcome {
    const N: usize = 200;
    let (a, b) = sides(t);
    let conn = |s: &Side| {
        s.ia.create_evd(2 * N as i32, EvdFlags::CONNECTION, None)
            .unwrap()
    };
    let (a_conn, b_conn) = (conn(&a), conn(&b));
    let b_cr = b.ia.create_evd(N as i32, EvdFlags::CR, None).unwrap();
    let psp =
        b.ia.create_psp(t.qual(), &b_cr, PspFlags::Consumer)
            .unwrap();
    let eps = |s: &Side, conn: &dat::Evd| -> Vec<dat::Ep> {
        (0..N)
            .map(|_| {
                s.ia.create_ep(&EpParams {
                    connect_evd: Some(conn),
                    ..s.ep_params()
                })
                .unwrap()
            })
            .collect()
    };
    let (a_eps, b_eps) = (eps(&a, &a_conn), eps(&b, &b_conn));
    // The next connection event, polled the way dtestcm's server polls (dequeue in a loop).
    let poll = |evd: &dat::Evd| {
        let end = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            match evd.dequeue() {
                Ok(ev) => return ev,
                Err(e) if e == DatError::QUEUE_EMPTY && std::time::Instant::now() < end => {}
                Err(e) => panic!("no connection event: {e}"),
            }
        }
    };
    std::thread::scope(|sc| {
        let requester = sc.spawn(|| {
            for ep in &a_eps {
                connect_ep(ep, &b.addr(), psp.conn_qual(), b"");
            }
            for i in 0..N {
                let ev = poll(&a_conn);
                assert_eq!(ev.number, EventNumber::Established, "event {i}: {ev:?}");
            }
            for ep in &a_eps {
                ep.disconnect(CloseFlags::Graceful).unwrap();
            }
            for i in 0..N {
                let ev = poll(&a_conn);
                assert_eq!(ev.number, EventNumber::Disconnected, "event {i}: {ev:?}");
            }
        });
        for ep in &b_eps {
            expect_cr(&b.ia, &b_cr, &psp).accept(Some(ep), b"").unwrap();
        }
        for i in 0..N {
            let ev = poll(&b_conn);
            assert_eq!(
                ev.number,
                EventNumber::Established,
                "connection event {i} of the {N} establishments: {ev:?}"
            );
        }
        for i in 0..N {
            let ev = poll(&b_conn);
            assert_eq!(ev.number, EventNumber::Disconnected, "event {i}: {ev:?}");
        }
        requester.join().unwrap();
    });
    Outcome::Pass
}

/// A post made the moment `ESTABLISHED` is dequeued is accepted, on both sides, connection
/// after connection: the new state is visible to posts before the event is (posts read the
/// state without the EP lock; dapltest's transaction test posts at once and failed with
/// `DAT_INVALID_STATE_EP_UNCONNECTED` while the event came first).
pub fn post_at_once_after_established(t: &dyn Target) -> Outcome {
    use dat::Evd;
    use dat::types::{CompletionFlags, Cookie};

    use crate::harness::{expect_dto, wait_state};
    /// Busy-polls `evd` (no blocking wait) until `ep`'s ESTABLISHED arrives.
    fn established(evd: &Evd, ep: &dat::Ep) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(ev) = evd.dequeue() {
                assert_eq!(ev.number, EventNumber::Established, "{ev:?}");
                assert_eq!(ev.ep(), Some(ep.id()), "{ev:?}");
                return;
            }
            assert!(std::time::Instant::now() < deadline, "no ESTABLISHED");
            std::hint::spin_loop();
        }
    }
    let (a, b) = sides(t);
    let psp = b.psp(t);
    let none = CompletionFlags::DEFAULT;
    for round in 0..100u64 {
        let ea = a.another_ep();
        let eb = b.another_ep();
        ea.post_recv(&[a.lmr.triplet(0, 8)], Cookie(round), none)
            .unwrap();
        eb.post_recv(&[b.lmr.triplet(0, 8)], Cookie(round), none)
            .unwrap();
        connect_ep(&ea, &b.addr(), psp.conn_qual(), b"");
        let cr = expect_cr(&b.ia, &b.cr, &psp);
        cr.accept(Some(&eb), b"").expect("accept");
        established(&a.conn, &ea);
        assert_eq!(
            ea.post_send(&[a.lmr.triplet(8, 8)], Cookie(round), none),
            Ok(()),
            "active side, round {round}"
        );
        established(&b.conn, &eb);
        assert_eq!(
            eb.post_send(&[b.lmr.triplet(8, 8)], Cookie(round), none),
            Ok(()),
            "passive side, round {round}"
        );
        for evd in [&a.recv, &a.req, &b.recv, &b.req] {
            assert_eq!(expect_dto(evd).cookie, Cookie(round));
        }
        ea.disconnect(CloseFlags::Abrupt).unwrap();
        wait_state(&a.ia, &ea, EpState::Disconnected);
        wait_state(&b.ia, &eb, EpState::Disconnected);
        while a.conn.dequeue().is_ok() || b.conn.dequeue().is_ok() {}
        ea.free().unwrap();
        eb.free().unwrap();
    }
    Outcome::Pass
}
