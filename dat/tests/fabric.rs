//! The public API end to end over the deterministic in-memory test fabric: this proves the
//! provider traits and the core's semantics; the real transports have their own tests and the
//! conformance suite.

use std::sync::Arc;
use std::time::Duration;

use dat::types::{
    CloseFlags, CompletionFlags, ConnQual, Cookie, DtoOp, DtoStatus, EvdFlags, EventNumber,
    MemPriv, PspFlags, Qos, Timeout,
};
use dat::{ConnectFlags, Cr, Ep, EpParams, EpState, Evd, Event, EventData, Ia, Lmr, Pz, Registry};
use dat_core::config::{Source, parse_toml};
use dat_core::testing::{Fabric, MemProvider};

const REGISTRY: &str = r#"
version = 1
default = "a"

[[ia]]
name = "a"
provider = "mem"
params = { address = "10.0.0.1" }

[[ia]]
name = "b"
provider = "mem"
params = { address = "10.0.0.2" }
"#;

const WAIT: Timeout = Timeout(2_000_000);

fn registry(fabric: &Arc<Fabric>) -> Registry {
    let cfg = parse_toml(REGISTRY, Source::Embedded, &["mem"]).expect("registry parses");
    Registry::new(cfg, vec![MemProvider::new(fabric.clone())])
}

/// One side: IA, PZ, EVDs, an EP and a registered buffer.
struct Side {
    ia: Ia,
    pz: Pz,
    conn: Evd,
    cr: Evd,
    dto: Evd,
    ep: Ep,
    lmr: Lmr,
}

fn side(reg: &Registry, name: &str) -> Side {
    let ia = reg.open_ia(Some(name), 8).expect("open");
    let pz = ia.create_pz().expect("pz");
    let conn = ia
        .create_evd(8, EvdFlags::CONNECTION, None)
        .expect("conn evd");
    let cr = ia.create_evd(8, EvdFlags::CR, None).expect("cr evd");
    let dto = ia
        .create_evd(64, EvdFlags::DTO | EvdFlags::RMR_BIND, None)
        .expect("dto evd");
    let ep = ia
        .create_ep(&EpParams {
            pz: Some(&pz),
            recv_evd: Some(&dto),
            request_evd: Some(&dto),
            connect_evd: Some(&conn),
            ..EpParams::default()
        })
        .expect("ep");
    let lmr = pz.alloc(4096, MemPriv::ALL).expect("lmr");
    Side {
        ia,
        pz,
        conn,
        cr,
        dto,
        ep,
        lmr,
    }
}

fn wait(evd: &Evd) -> Event {
    evd.wait(WAIT, 1).expect("event").0
}

fn conn_event(evd: &Evd, number: EventNumber) -> Box<[u8]> {
    let ev = wait(evd);
    assert_eq!(ev.number, number, "{ev:?}");
    match ev.data {
        EventData::Connection { private_data, .. } => private_data,
        other => panic!("not a connection event: {other:?}"),
    }
}

/// Connects a to b on qualifier 77 with private data both ways.
fn connected(fabric: &Arc<Fabric>) -> (Side, Side) {
    let reg = registry(fabric);
    let a = side(&reg, "a");
    let b = side(&reg, "b");
    let psp =
        b.ia.create_psp(ConnQual(77), &b.cr, PspFlags::Consumer)
            .expect("psp");
    let addr_b = b.ia.attr().ia_address;
    a.ep.connect(
        addr_b,
        ConnQual(77),
        WAIT,
        b"hello",
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .expect("connect");
    assert_eq!(a.ep.state().unwrap(), EpState::ActiveConnectionPending);
    let cr = request(&b);
    let param = cr.query().expect("cr query");
    assert_eq!(&*param.private_data, b"hello");
    assert_eq!(param.remote_address, a.ia.attr().ia_address);
    cr.accept(Some(&b.ep), b"world").expect("accept");
    assert_eq!(&*conn_event(&a.conn, EventNumber::Established), b"world");
    assert_eq!(&*conn_event(&b.conn, EventNumber::Established), b"");
    assert_eq!(a.ep.state().unwrap(), EpState::Connected);
    assert_eq!(b.ep.state().unwrap(), EpState::Connected);
    psp.free().expect("psp free");
    (a, b)
}

fn request(s: &Side) -> Cr {
    let ev = wait(&s.cr);
    assert_eq!(ev.number, EventNumber::ConnectionRequest);
    let EventData::ConnectionRequest { cr, conn_qual, .. } = ev.data else {
        panic!("{ev:?}")
    };
    assert_eq!(conn_qual, ConnQual(77));
    s.ia.cr(cr).expect("cr is pending")
}

fn completion(evd: &Evd) -> dat::DtoCompletion {
    match wait(evd).data {
        EventData::Dto(c) => c,
        other => panic!("not a DTO completion: {other:?}"),
    }
}

#[test]
fn connect_send_rdma_disconnect() {
    let fabric = Fabric::new();
    let (a, b) = connected(&fabric);

    // Send "ping" from a into a receive posted on b, scattered over two segments.
    b.ep.post_recv(
        &[b.lmr.triplet(0, 2), b.lmr.triplet(100, 8)],
        Cookie(1),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    a.lmr.write(0, b"ping").unwrap();
    a.ep.post_send(&[a.lmr.triplet(0, 4)], Cookie(2), CompletionFlags::DEFAULT)
        .unwrap();
    let c = completion(&a.dto);
    assert_eq!(
        (c.cookie, c.status, c.transferred_length, c.operation),
        (Cookie(2), DtoStatus::Success, 4, DtoOp::Send)
    );
    let c = completion(&b.dto);
    assert_eq!(
        (c.cookie, c.status, c.transferred_length, c.operation),
        (Cookie(1), DtoStatus::Success, 4, DtoOp::Receive)
    );
    let mut got = [0u8; 4];
    b.lmr.read(0, &mut got[..2]).unwrap();
    b.lmr.read(100, &mut got[2..]).unwrap();
    assert_eq!(&got, b"ping");

    // One-sided write a -> b, then read it back from b into a fresh place on a.
    a.lmr.write(200, b"one-sided").unwrap();
    a.ep.post_rdma_write(
        &[a.lmr.triplet(200, 9)],
        Cookie(3),
        b.lmr.rmr_triplet(1000, 9),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    let c = completion(&a.dto);
    assert_eq!(
        (c.status, c.operation, c.transferred_length),
        (DtoStatus::Success, DtoOp::RdmaWrite, 9)
    );
    let mut w = [0u8; 9];
    b.lmr.read(1000, &mut w).unwrap();
    assert_eq!(&w, b"one-sided");
    assert!(
        b.dto.is_empty(),
        "the target's application sees nothing of an RDMA write"
    );
    a.ep.post_rdma_read(
        &[a.lmr.triplet(3000, 9)],
        Cookie(4),
        b.lmr.rmr_triplet(1000, 9),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    let c = completion(&a.dto);
    assert_eq!(
        (c.cookie, c.status, c.operation),
        (Cookie(4), DtoStatus::Success, DtoOp::RdmaRead)
    );
    let mut r = [0u8; 9];
    a.lmr.read(3000, &mut r).unwrap();
    assert_eq!(&r, b"one-sided");

    // A suppressed send completes silently.
    b.ep.post_recv(&[b.lmr.triplet(0, 64)], Cookie(5), CompletionFlags::DEFAULT)
        .unwrap();
    a.ep.post_send(&[], Cookie(6), CompletionFlags::SUPPRESS)
        .unwrap();
    let c = completion(&b.dto);
    assert_eq!((c.cookie, c.transferred_length), (Cookie(5), 0));
    assert!(a.dto.is_empty());

    // Disconnect: both sides see DISCONNECTED; a receive still posted is flushed.
    b.ep.post_recv(&[b.lmr.triplet(0, 64)], Cookie(7), CompletionFlags::DEFAULT)
        .unwrap();
    a.ep.disconnect(CloseFlags::Graceful).unwrap();
    conn_event(&a.conn, EventNumber::Disconnected);
    conn_event(&b.conn, EventNumber::Disconnected);
    let c = completion(&b.dto);
    assert_eq!((c.cookie, c.status), (Cookie(7), DtoStatus::Flushed));
    assert_eq!(a.ep.state().unwrap(), EpState::Disconnected);
    assert_eq!(b.ep.state().unwrap(), EpState::Disconnected);

    // Posting after the disconnect completes as flushed; reset makes the EP reusable.
    a.ep.post_send(&[a.lmr.triplet(0, 4)], Cookie(8), CompletionFlags::DEFAULT)
        .unwrap();
    let c = completion(&a.dto);
    assert_eq!((c.cookie, c.status), (Cookie(8), DtoStatus::Flushed));
    a.ep.reset().unwrap();
    assert_eq!(a.ep.state().unwrap(), EpState::Unconnected);

    // Teardown in order; a PZ in use cannot be freed.
    assert_eq!(
        a.pz.free().unwrap_err(),
        dat::DatError::invalid_state(dat::Subtype::StatePzInUse)
    );
    for s in [a, b] {
        s.ep.free().unwrap();
        s.lmr.free().unwrap();
        s.pz.free().unwrap();
        for e in [&s.dto, &s.conn, &s.cr] {
            e.free().unwrap();
        }
        s.ia.close(CloseFlags::Graceful).unwrap();
    }
}

#[test]
fn bad_rkey_breaks_both_sides_and_touches_nothing() {
    let fabric = Fabric::new();
    let (a, b) = connected(&fabric);
    b.lmr.write(0, &[7u8; 16]).unwrap();
    let mut bad = b.lmr.rmr_triplet(0, 16);
    bad.rmr_context ^= 0x5a5a_5a5a;
    a.ep.post_rdma_write(
        &[a.lmr.triplet(0, 16)],
        Cookie(1),
        bad,
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    let c = completion(&a.dto);
    assert_eq!(c.status, DtoStatus::RemoteAccess);
    conn_event(&a.conn, EventNumber::Broken);
    conn_event(&b.conn, EventNumber::Broken);
    assert_eq!(b.ep.state().unwrap(), EpState::Disconnected);
    let mut got = [0u8; 16];
    b.lmr.read(0, &mut got).unwrap();
    assert_eq!(got, [7u8; 16]);
}

#[test]
fn out_of_bounds_and_missing_privilege_are_remote_access() {
    let fabric = Fabric::new();
    let (a, b) = connected(&fabric);
    // One byte past the registration.
    a.ep.post_rdma_read(
        &[a.lmr.triplet(0, 2)],
        Cookie(1),
        b.lmr.rmr_triplet(4095, 2),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    assert_eq!(completion(&a.dto).status, DtoStatus::RemoteAccess);
    conn_event(&a.conn, EventNumber::Broken);

    let fabric = Fabric::new();
    let (a, b2) = connected(&fabric);
    let read_only = b2
        .pz
        .alloc(
            64,
            MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_READ,
        )
        .unwrap();
    a.ep.post_rdma_write(
        &[a.lmr.triplet(0, 8)],
        Cookie(2),
        read_only.rmr_triplet(0, 8),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    assert_eq!(completion(&a.dto).status, DtoStatus::RemoteAccess);
    drop(b);
}

#[test]
fn reject_no_listener_unreachable_and_timeout() {
    let fabric = Fabric::new();
    let reg = registry(&fabric);
    let a = side(&reg, "a");
    let b = side(&reg, "b");
    let addr_b = b.ia.attr().ia_address;
    let _psp =
        b.ia.create_psp(ConnQual(77), &b.cr, PspFlags::Consumer)
            .unwrap();

    // Rejected with private data.
    a.ep.connect(
        addr_b,
        ConnQual(77),
        WAIT,
        b"please",
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .unwrap();
    request(&b).reject(b"no").unwrap();
    assert_eq!(&*conn_event(&a.conn, EventNumber::PeerRejected), b"no");
    assert_eq!(a.ep.state().unwrap(), EpState::Disconnected);
    a.ep.reset().unwrap();

    // Nobody listens on 78.
    a.ep.connect(
        addr_b,
        ConnQual(78),
        WAIT,
        &[],
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .unwrap();
    conn_event(&a.conn, EventNumber::NonPeerRejected);
    a.ep.reset().unwrap();

    // No IA at that address.
    let nowhere = "10.9.9.9:0".parse().unwrap();
    a.ep.connect(
        nowhere,
        ConnQual(77),
        WAIT,
        &[],
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .unwrap();
    conn_event(&a.conn, EventNumber::Unreachable);
    a.ep.reset().unwrap();

    // Nobody answers within the consumer's timeout (virtual clock).
    a.ep.connect(
        addr_b,
        ConnQual(77),
        Timeout(1000),
        &[],
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .unwrap();
    assert!(a.ia.progress());
    fabric.advance(Duration::from_millis(2));
    conn_event(&a.conn, EventNumber::TimedOut);
    assert_eq!(a.ep.state().unwrap(), EpState::Disconnected);
}

#[test]
fn consumer_call_errors_have_exact_codes() {
    use dat::{DatError, ErrorType, Subtype};
    let fabric = Fabric::new();
    let reg = registry(&fabric);
    let a = side(&reg, "a");
    let addr = a.ia.attr().ia_address;
    // Zero timeout, oversized private data, unsupported QoS.
    assert_eq!(
        a.ep.connect(
            addr,
            ConnQual(1),
            Timeout::ZERO,
            &[],
            Qos::BestEffort,
            ConnectFlags::Default
        ),
        Err(DatError::invalid_arg(4))
    );
    assert_eq!(
        a.ep.connect(
            addr,
            ConnQual(1),
            WAIT,
            &[0; 257],
            Qos::BestEffort,
            ConnectFlags::Default
        ),
        Err(DatError::invalid_arg(5))
    );
    assert_eq!(
        a.ep.connect(
            addr,
            ConnQual(1),
            WAIT,
            &[],
            Qos::LowLatency,
            ConnectFlags::Default
        ),
        Err(DatError::new(
            ErrorType::ModelNotSupported,
            Subtype::NoSubtype
        ))
    );
    // Posting a send while unconnected; disconnecting while unconnected.
    assert_eq!(
        a.ep.post_send(&[], Cookie(0), CompletionFlags::DEFAULT),
        Err(DatError::invalid_state(Subtype::StateEpUnconnected))
    );
    assert_eq!(
        a.ep.disconnect(CloseFlags::Abrupt),
        Err(DatError::invalid_state(Subtype::StateEpUnconnected))
    );
    // Dequeue on an empty EVD is exactly 0x000D0000.
    assert_eq!(a.dto.dequeue().unwrap_err().to_raw(), 0x000D_0000);
    // Local protection: unknown lmr_context, out of range.
    let mut t = a.lmr.triplet(0, 8);
    t.lmr_context ^= 1;
    assert_eq!(
        a.ep.post_recv(&[t], Cookie(0), CompletionFlags::DEFAULT)
            .unwrap_err()
            .kind(),
        ErrorType::ProtectionViolation
    );
    assert_eq!(
        a.ep.post_recv(
            &[a.lmr.triplet(4000, 200)],
            Cookie(0),
            CompletionFlags::DEFAULT
        )
        .unwrap_err(),
        DatError::invalid_arg(3)
    );
    // Freed handles are stale.
    let extra = a.ia.create_evd(4, EvdFlags::DTO, None).unwrap();
    extra.free().unwrap();
    assert_eq!(
        extra.dequeue().unwrap_err().kind(),
        ErrorType::InvalidHandle
    );
    // An EVD in use cannot be freed; a graceful IA close with children is refused.
    assert_eq!(
        a.dto.free(),
        Err(DatError::invalid_state(Subtype::StateEvdInUse))
    );
    assert_eq!(
        a.ia.close(CloseFlags::Graceful),
        Err(DatError::invalid_state(Subtype::StateIaInUse))
    );
    a.ia.close(CloseFlags::Abrupt).unwrap();
    assert_eq!(a.ep.state().unwrap_err().kind(), ErrorType::InvalidHandle);
}

#[test]
fn unknown_ia_name_is_provider_not_found() {
    let fabric = Fabric::new();
    let reg = registry(&fabric);
    let err = reg.open_ia(Some("nope"), 8).unwrap_err();
    assert_eq!(err.code().to_raw(), 0x800A_0064);
    assert!(err.message().contains("nope"), "{err}");
}

#[test]
fn memory_window_exposes_only_its_range_and_rebinding_revokes() {
    let fabric = Fabric::new();
    let (a, b) = connected(&fabric);
    let rmr = b.pz.create_rmr().unwrap();
    let window = b.lmr.triplet(100, 64);
    let ctx = rmr
        .bind(
            &b.lmr,
            window,
            MemPriv::REMOTE_WRITE,
            dat::types::VaType::Va,
            &b.ep,
            Cookie(9),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    let ev = wait(&b.dto);
    assert_eq!(ev.number, EventNumber::RmrBindCompletion);
    assert_eq!(rmr.rmr_context(), Some(ctx));
    // A PZ with a window cannot be freed.
    assert_eq!(
        b.pz.free().unwrap_err(),
        dat::DatError::invalid_state(dat::Subtype::StatePzInUse)
    );

    let remote = dat::types::RmrTriplet {
        virtual_address: b.lmr.address() + 100,
        segment_length: 8,
        rmr_context: ctx,
    };
    a.lmr.write(0, b"windowed").unwrap();
    a.ep.post_rdma_write(
        &[a.lmr.triplet(0, 8)],
        Cookie(1),
        remote,
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    assert_eq!(completion(&a.dto).status, DtoStatus::Success);
    let mut got = [0u8; 8];
    b.lmr.read(100, &mut got).unwrap();
    assert_eq!(&got, b"windowed");

    // Rebinding gives a new key; the old one fails (and breaks the connection, as on IB).
    let ctx2 = rmr
        .bind(
            &b.lmr,
            b.lmr.triplet(0, 16),
            MemPriv::REMOTE_WRITE,
            dat::types::VaType::Va,
            &b.ep,
            Cookie(10),
            CompletionFlags::SUPPRESS,
        )
        .unwrap();
    assert_ne!(ctx, ctx2);
    assert!(b.dto.is_empty(), "a suppressed bind completes silently");
    a.ep.post_rdma_write(
        &[a.lmr.triplet(0, 8)],
        Cookie(2),
        remote,
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    assert_eq!(completion(&a.dto).status, DtoStatus::RemoteAccess);
    rmr.free().unwrap();
    assert_eq!(
        rmr.query().unwrap_err().kind(),
        dat::ErrorType::InvalidHandle
    );
}

#[test]
fn modify_follows_the_state_rules() {
    use dat::{DatError, EpModify, Subtype};
    let fabric = Fabric::new();
    let reg = registry(&fabric);
    let s = side(&reg, "b");
    let bare = s.ia.create_ep(&EpParams::default()).unwrap();
    let addr = s.ia.attr().ia_address;
    // Without a PZ and a connect EVD the EP cannot connect.
    assert_eq!(
        bare.connect(
            addr,
            ConnQual(5),
            WAIT,
            &[],
            Qos::BestEffort,
            ConnectFlags::Default
        ),
        Err(DatError::invalid_state(Subtype::StateEpNotReady))
    );
    // A connect EVD without the CONNECTION stream is refused and changes nothing.
    assert_eq!(
        bare.modify(&EpModify {
            pz: Some(&s.pz),
            connect_evd: Some(&s.dto),
            ..EpModify::default()
        }),
        Err(DatError::invalid_handle(Subtype::InvalidHandleEvdConn))
    );
    assert_eq!(bare.query().unwrap().config.pz, None);
    bare.modify(&EpModify {
        pz: Some(&s.pz),
        connect_evd: Some(&s.conn),
        ..EpModify::default()
    })
    .unwrap();
    assert_eq!(bare.query().unwrap().config.pz, Some(s.pz.id()));
    // The PZ is now in use by the EP; the connect EVD too.
    assert_eq!(
        s.conn.free(),
        Err(DatError::invalid_state(Subtype::StateEvdInUse))
    );
    bare.connect(
        addr,
        ConnQual(5),
        WAIT,
        &[],
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .unwrap();
    // While connecting, nothing may change.
    assert_eq!(
        bare.modify(&EpModify {
            pz: Some(&s.pz),
            ..EpModify::default()
        }),
        Err(DatError::invalid_state(Subtype::StateEpActConnPending))
    );
}

/// Busy polls that drive progress get completions in posting order whether the first one is
/// handed straight to the poll or queued (several completions found by one progress call,
/// completions for another EVD found meanwhile, a CNO attached), and the queue counts stay
/// right.
#[test]
fn polled_completions_keep_their_order() {
    fn poll(evd: &Evd) -> dat::DtoCompletion {
        for _ in 0..1000 {
            match evd.dequeue() {
                Ok(Event {
                    data: EventData::Dto(c),
                    ..
                }) => return c,
                Ok(other) => panic!("{other:?}"),
                Err(e) => assert_eq!(e, dat::DatError::QUEUE_EMPTY),
            }
        }
        panic!("no completion");
    }
    let fabric = Fabric::new();
    let (a, b) = connected(&fabric);
    let cno = b.ia.create_cno().expect("cno");
    for with_cno in [false, true] {
        if with_cno {
            b.dto.modify_cno(Some(&cno)).expect("attach");
        }
        for i in 0..3u64 {
            b.ep.post_recv(
                &[b.lmr.triplet(64 * i, 8)],
                Cookie(i),
                CompletionFlags::DEFAULT,
            )
            .expect("recv");
        }
        for i in 0..3u64 {
            a.ep.post_send(
                &[a.lmr.triplet(64 * i, 8)],
                Cookie(10 + i),
                CompletionFlags::DEFAULT,
            )
            .expect("send");
        }
        // b's poll runs the fabric: b's three receive completions and a's three send
        // completions are all reported inside it.
        let first = poll(&b.dto);
        assert_eq!((first.cookie, first.operation), (Cookie(0), DtoOp::Receive));
        assert_eq!(b.dto.len(), 2, "the other two are queued");
        for i in 1..3u64 {
            assert_eq!(poll(&b.dto).cookie, Cookie(i));
        }
        assert_eq!(a.dto.len(), 3, "a's completions are queued on a's EVD");
        for i in 0..3u64 {
            let c = poll(&a.dto);
            assert_eq!((c.cookie, c.operation), (Cookie(10 + i), DtoOp::Send));
        }
        assert!(b.dto.is_empty() && a.dto.is_empty());
        if with_cno {
            assert_eq!(
                cno.wait(Timeout(0)).expect("the CNO was triggered"),
                Some(b.dto.id())
            );
        }
    }
    b.dto.modify_cno(None).expect("detach");
}
