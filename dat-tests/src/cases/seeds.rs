//! The seeds' statements (`shared/spec/seeds/`), one case per sentence that states a
//! behaviour of `dat_ep_connect`, `dat_ep_dup_connect`, `dat_ep_disconnect` or
//! `dat_ep_create`. Each doc comment quotes the statement.

use std::time::Duration;

use dat::types::{
    CloseFlags, CompletionFlags, Cookie, DtoOp, DtoStatus, EvdFlags, EventNumber, MemPriv, Qos,
    Timeout,
};
use dat::{DatError, EpParams, EpState, ErrorType, EventData, Subtype};

use crate::Outcome;
use crate::harness::{
    CONNECT_TIMEOUT, Side, assert_empty, connect_ep, expect_completion, expect_conn, expect_cr,
    ise, pair, sides,
};
use crate::target::Target;

/// connect: "Upon successful completion of this operation, the local Endpoint is transferred
/// into DAT_EP_STATE_ACTIVE_CONNECTION_PENDING."
pub fn seed_connect_success_is_acp(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"");
    assert_eq!(a.ep.state(), Ok(EpState::ActiveConnectionPending));
    assert_empty(&a.conn);
    Outcome::Pass
}

/// connect: "The acceptance ... is reported ... through a DAT_CONNECTION_EVENT_ESTABLISHED
/// event on the connect_evd_handle of the local Endpoint and the local Endpoint is
/// automatically transitioned into a DAT_EP_STATE_CONNECTED state."
pub fn seed_connect_established(t: &dyn Target) -> Outcome {
    let p = pair(t);
    assert_eq!(p.a.ep.state(), Ok(EpState::Connected));
    assert_empty(&p.a.conn);
    Outcome::Pass
}

/// connect: "The Consumer-provided private_data is passed to the remote side and is provided
/// to the remote Consumer in the Connection Request."
pub fn seed_connect_private_data_in_request(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), &[0, 1, 2, 255]);
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    assert_eq!(&*cr.query().unwrap().private_data, &[0, 1, 2, 255]);
    Outcome::Pass
}

/// connect: "The rejection of the connection by the remote Consumer is reported ... through
/// a DAT_CONNECTION_EVENT_PEER_REJECTED event ... and the local Endpoint is automatically
/// transitioned into a DAT_EP_STATE_DISCONNECTED state."
pub fn seed_connect_peer_rejected(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"");
    expect_cr(&b.ia, &b.cr, &psp).reject(b"").unwrap();
    expect_conn(&a.conn, EventNumber::PeerRejected, &a.ep);
    assert_eq!(a.ep.state(), Ok(EpState::Disconnected));
    Outcome::Pass
}

/// connect: "... remote Consumer is not listening on the requested Connection Qualifier ...
/// the event returned ... is DAT_CONNECTION_EVENT_NON_PEER_REJECTED ... the local Endpoint
/// is automatically transitioned into DAT_EP_STATE_DISCONNECTED state."
pub fn seed_connect_non_peer_rejected(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    connect_ep(&a.ep, &b.addr(), t.qual(), b"");
    expect_conn(&a.conn, EventNumber::NonPeerRejected, &a.ep);
    assert_eq!(a.ep.state(), Ok(EpState::Disconnected));
    Outcome::Pass
}

/// connect: "When the timeout expired prior to completion of the Connection establishment,
/// the local Endpoint is automatically transitioned into a DAT_EP_STATE_DISCONNECTED state
/// and the local Consumer (notified) through a DAT_CONNECTION_EVENT_TIMED_OUT event."
pub fn seed_connect_timed_out(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    a.ep.connect(
        b.addr(),
        psp.conn_qual(),
        Timeout(100_000),
        b"",
        Qos::BestEffort,
        dat::ConnectFlags::Default,
    )
    .unwrap();
    t.let_time_pass(&a.ia, Duration::from_millis(300));
    expect_conn(&a.conn, EventNumber::TimedOut, &a.ep);
    assert_eq!(a.ep.state(), Ok(EpState::Disconnected));
    a.ep.reset().unwrap();
    assert_eq!(a.ep.state(), Ok(EpState::Unconnected));
    Outcome::Pass
}

/// connect: "If the local Provider or Transport does not support the requested qos, the
/// operation fails and DAT_MODEL_NOT_SUPPORTED is returned synchronously."
pub fn seed_connect_qos_model_not_supported(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    assert_eq!(
        a.ep.connect(
            b.addr(),
            t.qual(),
            CONNECT_TIMEOUT,
            b"",
            Qos::HighThroughput,
            dat::ConnectFlags::Default
        ),
        Err(DatError::new(
            ErrorType::ModelNotSupported,
            Subtype::NoSubtype
        ))
    );
    assert_eq!(a.ep.state(), Ok(EpState::Unconnected));
    Outcome::Pass
}

/// connect: "DAT_INVALID_STATE: Parameter in an invalid state. Endpoint was not in
/// DAT_EP_STATE_UNCONNECTED state."
pub fn seed_connect_not_unconnected(t: &dyn Target) -> Outcome {
    let p = pair(t);
    crate::harness::connect_ep_err(&p.a.ep, &p.b.addr(), p.qual, ise(EpState::Connected));
    Outcome::Pass
}

/// connect: "timeout: ... Values must be positive."
pub fn seed_connect_timeout_positive(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    assert_eq!(
        a.ep.connect(
            b.addr(),
            t.qual(),
            Timeout::ZERO,
            b"",
            Qos::BestEffort,
            dat::ConnectFlags::Default
        ),
        Err(DatError::invalid_arg(4))
    );
    Outcome::Pass
}

/// dup_connect: "The remote end of the requested connection shall be the same as the remote
/// end of the dup_ep_handle."
pub fn seed_dup_connect_same_remote_end(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let fresh = p.a.another_ep();
    fresh
        .dup_connect(&p.a.ep, CONNECT_TIMEOUT, b"", Qos::BestEffort)
        .unwrap();
    let cr = expect_cr(&p.b.ia, &p.b.cr, &p.psp);
    let q = cr.query().unwrap();
    assert_eq!(q.conn_qual, p.qual);
    assert_eq!(q.remote_address.ip(), p.a.addr().ip());
    let qf = fresh.query().unwrap();
    assert_eq!(
        (qf.remote_address, qf.remote_qual),
        (Some(p.b.addr()), Some(p.qual))
    );
    Outcome::Pass
}

/// dup_connect: "the local Endpoint is transferred into
/// DAT_EP_STATE_ACTIVE_CONNECTION_PENDING" and ESTABLISHED/CONNECTED on acceptance.
pub fn seed_dup_connect_established(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let fresh = p.a.another_ep();
    fresh
        .dup_connect(&p.a.ep, CONNECT_TIMEOUT, b"", Qos::BestEffort)
        .unwrap();
    assert_eq!(fresh.state(), Ok(EpState::ActiveConnectionPending));
    let eb = p.b.another_ep();
    expect_cr(&p.b.ia, &p.b.cr, &p.psp)
        .accept(Some(&eb), b"")
        .unwrap();
    expect_conn(&p.a.conn, EventNumber::Established, &fresh);
    assert_eq!(fresh.state(), Ok(EpState::Connected));
    Outcome::Pass
}

/// dup_connect: rejection "is reported ... through a DAT_CONNECTION_EVENT_PEER_REJECTED
/// event" and the EP goes to (UN)DISCONNECTED (read DISCONNECTED, reference 3.5 item 1).
pub fn seed_dup_connect_peer_rejected(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let fresh = p.a.another_ep();
    fresh
        .dup_connect(&p.a.ep, CONNECT_TIMEOUT, b"", Qos::BestEffort)
        .unwrap();
    expect_cr(&p.b.ia, &p.b.cr, &p.psp)
        .reject(b"dup-no")
        .unwrap();
    assert_eq!(
        &*expect_conn(&p.a.conn, EventNumber::PeerRejected, &fresh),
        b"dup-no"
    );
    assert_eq!(fresh.state(), Ok(EpState::Disconnected));
    assert_eq!(
        p.a.ep.state(),
        Ok(EpState::Connected),
        "the dup is untouched"
    );
    Outcome::Pass
}

/// dup_connect: timeout "... DAT_CONNECTION_EVENT_TIMED_OUT event" (state DISCONNECTED).
pub fn seed_dup_connect_timed_out(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let fresh = p.a.another_ep();
    fresh
        .dup_connect(&p.a.ep, Timeout(100_000), b"", Qos::BestEffort)
        .unwrap();
    t.let_time_pass(&p.a.ia, Duration::from_millis(300));
    expect_conn(&p.a.conn, EventNumber::TimedOut, &fresh);
    assert_eq!(fresh.state(), Ok(EpState::Disconnected));
    Outcome::Pass
}

/// dup_connect: unsupported qos "fails and DAT_MODEL_NOT_SUPPORTED is returned
/// synchronously"; "timeout ... Values must be positive."
pub fn seed_dup_connect_sync_codes(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let fresh = p.a.another_ep();
    assert_eq!(
        fresh.dup_connect(&p.a.ep, CONNECT_TIMEOUT, b"", Qos::HighThroughput),
        Err(DatError::new(
            ErrorType::ModelNotSupported,
            Subtype::NoSubtype
        ))
    );
    assert_eq!(
        fresh.dup_connect(&p.a.ep, Timeout::ZERO, b"", Qos::BestEffort),
        Err(DatError::invalid_arg(3))
    );
    assert_eq!(fresh.state(), Ok(EpState::Unconnected));
    Outcome::Pass
}

/// dup_connect: "DAT_INVALID_HANDLE: The ep_handle or dup_ep_handle parameter is invalid."
pub fn seed_dup_connect_invalid_handles(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let fresh = p.a.another_ep();
    let dead = p.a.another_ep();
    dead.free().unwrap();
    let h = DatError::invalid_handle(Subtype::InvalidHandleEp);
    assert_eq!(
        fresh.dup_connect(&dead, CONNECT_TIMEOUT, b"", Qos::BestEffort),
        Err(h)
    );
    assert_eq!(
        dead.dup_connect(&p.a.ep, CONNECT_TIMEOUT, b"", Qos::BestEffort),
        Err(h)
    );
    Outcome::Pass
}

/// disconnect: "The successful completion of the disconnect is reported ... through a
/// DAT_CONNECTION_EVENT_DISCONNECTED event on connect_evd_handle ... automatically
/// transitioned into a DAT_EP_STATE_DISCONNECTED state."
pub fn seed_disconnect_event_and_state(t: &dyn Target) -> Outcome {
    let p = pair(t);
    crate::harness::disconnect_pair(&p);
    assert_empty(&p.a.conn);
    assert_empty(&p.b.conn);
    Outcome::Pass
}

/// disconnect: "Disconnecting an unconnected Disconnected Endpoint is no-op."
pub fn seed_disconnect_disconnected_noop(t: &dyn Target) -> Outcome {
    let p = pair(t);
    crate::harness::disconnect_pair(&p);
    for f in [
        CloseFlags::Graceful,
        CloseFlags::Abrupt,
        CloseFlags::Graceful,
    ] {
        assert_eq!(p.a.ep.disconnect(f), Ok(()));
        assert_eq!(p.b.ep.disconnect(f), Ok(()));
    }
    assert_empty(&p.a.conn);
    assert_empty(&p.b.conn);
    Outcome::Pass
}

/// disconnect: "Disconnecting an Endpoint in DAT_EP_STATE_UNCONNECTED, DAT_EP_STATE_RESERVED,
/// DAT_EP_STATE_PASSIVE_CONNECTION_PENDING, and DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING is
/// disallowed."
pub fn seed_disconnect_disallowed_states(t: &dyn Target) -> Outcome {
    let mut skipped = Vec::new();
    for st in [
        EpState::Unconnected,
        EpState::Reserved,
        EpState::PassiveConnectionPending,
        EpState::TentativeConnectionPending,
    ] {
        match super::ep_states::make(t, st) {
            Ok(f) => {
                for fl in [CloseFlags::Graceful, CloseFlags::Abrupt] {
                    assert_eq!(f.ep.disconnect(fl), Err(ise(st)), "{st:?}");
                }
                assert_eq!(f.ep.state(), Ok(st));
            }
            Err(_) => skipped.push(st),
        }
    }
    if skipped.is_empty() {
        Outcome::Pass
    } else {
        Outcome::Skip(format!("states not reachable on this target: {skipped:?}"))
    }
}

/// disconnect: "Both abrupt and graceful disconnect ... during connection establishment,
/// DAT_EP_STATE_ACTIVE_CONNECTION_PENDING ... 'aborts' the connection establishment and
/// transitions the local Endpoint into DAT_EP_STATE_DISCONNECTED. That causes preposted Recv
/// DTOs to be flushed to recv_evd_handle."
pub fn seed_disconnect_acp_flushes_recvs(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    crate::harness::post_recv(&a, &a.ep, 0, 32, 41);
    crate::harness::post_recv(&a, &a.ep, 32, 32, 42);
    let psp = b.psp(t);
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"");
    let _cr = expect_cr(&b.ia, &b.cr, &psp);
    a.ep.disconnect(CloseFlags::Graceful).unwrap();
    assert_eq!(a.ep.state(), Ok(EpState::Disconnected));
    expect_conn(&a.conn, EventNumber::Disconnected, &a.ep);
    expect_completion(&a.recv, &a.ep, 41, DtoStatus::Flushed, DtoOp::Receive, 0);
    expect_completion(&a.recv, &a.ep, 42, DtoStatus::Flushed, DtoOp::Receive, 0);
    Outcome::Pass
}

/// disconnect: the same for DAT_EP_STATE_COMPLETION_PENDING (passive side).
pub fn seed_disconnect_cp_flushes_recvs(t: &dyn Target) -> Outcome {
    if !t.deterministic() {
        return Outcome::Skip(
            "COMPLETION_PENDING cannot be held open on a real transport (see ep_states)".into(),
        );
    }
    let (a, b) = sides(t);
    crate::harness::post_recv(&b, &b.ep, 0, 32, 51);
    let psp = b.psp(t);
    connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"");
    expect_cr(&b.ia, &b.cr, &psp)
        .accept(Some(&b.ep), b"")
        .unwrap();
    if b.ep.state() != Ok(EpState::CompletionPending) {
        return Outcome::Skip("COMPLETION_PENDING not observable on this target".into());
    }
    b.ep.disconnect(CloseFlags::Abrupt).unwrap();
    assert_eq!(b.ep.state(), Ok(EpState::Disconnected));
    expect_conn(&b.conn, EventNumber::Disconnected, &b.ep);
    expect_completion(&b.recv, &b.ep, 51, DtoStatus::Flushed, DtoOp::Receive, 0);
    // The active side never stays connected.
    let ev = crate::harness::next_event(&a.conn);
    if ev.number == EventNumber::Established {
        expect_conn(&a.conn, EventNumber::Disconnected, &a.ep);
    }
    crate::harness::wait_state(&a.ia, &a.ep, EpState::Disconnected);
    Outcome::Pass
}

/// disconnect: "For abrupt disconnect, all outstanding DTOs ... are completed
/// unsuccessfully" (posted receives flush, in order, on both sides).
pub fn seed_disconnect_abrupt_flushes_outstanding(t: &dyn Target) -> Outcome {
    let p = pair(t);
    for i in 0..4u64 {
        crate::harness::post_recv(&p.a, &p.a.ep, i * 64, 64, 100 + i);
        crate::harness::post_recv(&p.b, &p.b.ep, i * 64, 64, 200 + i);
    }
    p.a.ep.disconnect(CloseFlags::Abrupt).unwrap();
    expect_conn(&p.a.conn, EventNumber::Disconnected, &p.a.ep);
    expect_conn(&p.b.conn, EventNumber::Disconnected, &p.b.ep);
    for i in 0..4u64 {
        expect_completion(
            &p.a.recv,
            &p.a.ep,
            100 + i,
            DtoStatus::Flushed,
            DtoOp::Receive,
            0,
        );
        expect_completion(
            &p.b.recv,
            &p.b.ep,
            200 + i,
            DtoStatus::Flushed,
            DtoOp::Receive,
            0,
        );
    }
    Outcome::Pass
}

/// disconnect: "For graceful disconnect, all outstanding and in-progress request DTOs ...
/// must try to be completed successfully first" and "If the same EVD is used for
/// connect_evd_handle and [the DTO EVDs], all successful Completion events of in-progress
/// DTOs precede the Disconnect Completion event."
pub fn seed_disconnect_graceful_completes_first(t: &dyn Target) -> Outcome {
    let (ia_a, ia_b) = t.open_pair();
    let b = Side::new(ia_b);
    let pz = ia_a.create_pz().unwrap();
    let one = ia_a
        .create_evd(64, EvdFlags::DTO | EvdFlags::CONNECTION, None)
        .unwrap();
    let ep = ia_a
        .create_ep(&EpParams {
            pz: Some(&pz),
            recv_evd: Some(&one),
            request_evd: Some(&one),
            connect_evd: Some(&one),
            ..EpParams::default()
        })
        .unwrap();
    let lmr = pz.alloc(4096, MemPriv::ALL).unwrap();
    let psp = b.psp(t);
    connect_ep(&ep, &b.addr(), psp.conn_qual(), b"");
    expect_cr(&b.ia, &b.cr, &psp)
        .accept(Some(&b.ep), b"")
        .unwrap();
    expect_conn(&one, EventNumber::Established, &ep);
    for i in 0..8u64 {
        crate::harness::post_recv(&b, &b.ep, i * 16, 16, i);
    }
    for i in 0..8u64 {
        ep.post_send(
            &[lmr.triplet(i * 16, 16)],
            Cookie(i),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    }
    ep.disconnect(CloseFlags::Graceful).unwrap();
    let mut sends = 0;
    loop {
        let ev = crate::harness::next_event(&one);
        match ev.data {
            EventData::Dto(c) => {
                assert_eq!(
                    (c.status, c.cookie),
                    (DtoStatus::Success, Cookie(sends)),
                    "{c:?}"
                );
                sends += 1;
            }
            EventData::Connection { .. } => {
                assert_eq!(ev.number, EventNumber::Disconnected);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(sends, 8, "every send completed before DISCONNECTED");
    Outcome::Pass
}

/// disconnect: "No new Send, RDMA Read, and RDMA Write DTOs ... can be posted to the
/// Endpoint when the local Endpoint is in the DAT_EP_DISCONNECT_PENDING state."
pub fn seed_disconnect_pending_no_new_posts(t: &dyn Target) -> Outcome {
    let f = match super::ep_states::make(t, EpState::DisconnectPending) {
        Ok(f) => f,
        Err(o) => return o,
    };
    assert_eq!(
        f.ep.post_send(&[], Cookie(1), CompletionFlags::DEFAULT),
        Err(crate::harness::UNC)
    );
    Outcome::Pass
}

/// ep_create: "The Consumer creates an Endpoint prior to the establishment of a connection.
/// The created Endpoint is in DAT_EP_STATE_UNCONNECTED."
pub fn seed_ep_create_unconnected(t: &dyn Target) -> Outcome {
    let (ia, _) = t.open_pair();
    let bare = ia.create_ep(&EpParams::default()).unwrap();
    assert_eq!(bare.state(), Ok(EpState::Unconnected));
    let s = Side::new(ia);
    assert_eq!(s.ep.state(), Ok(EpState::Unconnected));
    Outcome::Pass
}

/// ep_create: "If the Consumer specifies NULL, the Provider fills it with its default
/// Endpoint attributes" (reasonable ones: sizes, depths and IOVs usable).
pub fn seed_ep_create_default_attributes(t: &dyn Target) -> Outcome {
    let (ia, _) = t.open_pair();
    let s = Side::new(ia);
    let a = s.ep.query().unwrap().config.attr;
    assert!(a.max_message_size > 0 && a.max_rdma_size > 0);
    assert!(a.max_recv_dtos > 0 && a.max_request_dtos > 0);
    assert!(a.max_recv_iov > 0 && a.max_request_iov > 0);
    assert_eq!(a.qos, Qos::BestEffort);
    assert!(u64::from(a.max_request_dtos) <= u64::from(s.ia.attr().max_dto_per_ep));
    Outcome::Pass
}

/// ep_create: "DAT_INVALID_PARAMETER: ... a combination of attributes or parameters is
/// invalid" (a receive depth without a receive EVD; SUPPRESS in receive flags).
pub fn seed_ep_create_invalid_combination(t: &dyn Target) -> Outcome {
    let (ia, _) = t.open_pair();
    let s = Side::new(ia);
    let attr = s.ep.query().unwrap().config.attr;
    let r = s.ia.create_ep(&EpParams {
        recv_evd: None,
        attr: Some(&attr),
        ..s.ep_params()
    });
    assert_eq!(r.unwrap_err(), DatError::invalid_arg(6));
    let mut sup = attr.clone();
    sup.recv_completion_flags = CompletionFlags::SUPPRESS;
    assert_eq!(
        s.ia.create_ep(&EpParams {
            attr: Some(&sup),
            ..s.ep_params()
        })
        .unwrap_err(),
        DatError::invalid_arg(6)
    );
    let mut qos = attr;
    qos.qos = Qos::LowLatency;
    assert_eq!(
        s.ia.create_ep(&EpParams {
            attr: Some(&qos),
            ..s.ep_params()
        })
        .unwrap_err()
        .kind(),
        ErrorType::ModelNotSupported
    );
    Outcome::Pass
}

/// ep_create: "Completions of Receive DTOs are reported in recv_evd_handle ..., and
/// completions of Send, RDMA Read, and RDMA Write DTOs are reported in request_evd_handle."
pub fn seed_ep_create_completion_routing(t: &dyn Target) -> Outcome {
    let p = pair(t);
    crate::harness::post_recv(&p.b, &p.b.ep, 0, 64, 1);
    crate::harness::post_send(&p.a, &p.a.ep, 0, 8, 2);
    expect_completion(&p.a.req, &p.a.ep, 2, DtoStatus::Success, DtoOp::Send, 8);
    expect_completion(&p.b.recv, &p.b.ep, 1, DtoStatus::Success, DtoOp::Receive, 8);
    p.a.ep
        .post_rdma_write(
            &[p.a.lmr.triplet(0, 8)],
            Cookie(3),
            p.b.lmr.rmr_triplet(0, 8),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(
        &p.a.req,
        &p.a.ep,
        3,
        DtoStatus::Success,
        DtoOp::RdmaWrite,
        8,
    );
    p.a.ep
        .post_rdma_read(
            &[p.a.lmr.triplet(0, 8)],
            Cookie(4),
            p.b.lmr.rmr_triplet(0, 8),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(&p.a.req, &p.a.ep, 4, DtoStatus::Success, DtoOp::RdmaRead, 8);
    assert_empty(&p.a.recv);
    assert_empty(&p.b.req);
    assert_empty(&p.b.recv);
    Outcome::Pass
}

/// ep_create: "LMRs and RMRs that match the Endpoint Protection Zone can be accessed by the
/// Endpoint" (and others cannot).
pub fn seed_ep_create_pz_match(t: &dyn Target) -> Outcome {
    let (ia, _) = t.open_pair();
    let s = Side::new(ia);
    let other = s.ia.create_pz().unwrap();
    let foreign = other.alloc(64, MemPriv::ALL).unwrap();
    assert_eq!(
        s.ep.post_recv(
            &[foreign.triplet(0, 8)],
            Cookie(1),
            CompletionFlags::DEFAULT
        ),
        Err(DatError::new(
            ErrorType::ProtectionViolation,
            Subtype::ProtectionWrite
        ))
    );
    assert_eq!(
        s.ep.post_recv(&[s.lmr.triplet(0, 8)], Cookie(1), CompletionFlags::DEFAULT),
        Ok(())
    );
    Outcome::Pass
}
