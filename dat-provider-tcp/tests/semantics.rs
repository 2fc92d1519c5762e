//! More DAT semantics over loopback: RSP, SRQ, EP free while connected, dup_connect,
//! LOCAL_LENGTH, qualifier conflicts, and hostile bytes from a raw TCP peer.

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};

use common::*;
use dat::types::{CompletionFlags, ConnQual, Cookie, DtoOp, DtoStatus, EventNumber, PspFlags, Qos};
use dat::{EpParams, ErrorType, SrqAttr};
use dat_provider_tcp::wire::Frame;

#[test]
fn rsp_accepts_on_its_reserved_endpoint() {
    let a = Node::new();
    let b = Node::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let qual = ConnQual(u64::from(port));
    let _rsp = b.ia.create_rsp(qual, &b.ep, &b.cr).unwrap();
    a.connect(&b, qual, b"rsp");
    let cr = b.next_cr();
    assert_eq!(cr.ep().map(|e| e.id()), Some(b.ep.id()));
    cr.accept(None, b"ok").unwrap();
    assert_eq!(a.conn_event(), (EventNumber::Established, (*b"ok").into()));
    assert_eq!(b.conn_event().0, EventNumber::Established);
}

#[test]
fn second_listener_on_a_qualifier_is_in_use() {
    let b = Node::new();
    let sp = b.listen();
    let e =
        b.ia.create_psp(sp.conn_qual(), &b.cr, PspFlags::Consumer)
            .unwrap_err();
    assert_eq!(e.kind(), ErrorType::ConnQualInUse);
}

#[test]
fn srq_feeds_receives_to_two_endpoints() {
    let a1 = Node::new();
    let a2 = Node::new();
    let b = Node::new();
    let srq =
        b.ia.create_srq(
            &b.pz,
            SrqAttr {
                max_recv_dtos: 8,
                max_recv_iov: 2,
                low_watermark: 0,
            },
        )
        .unwrap();
    let ep2 =
        b.ia.create_ep(&EpParams {
            pz: Some(&b.pz),
            recv_evd: Some(&b.dto),
            request_evd: Some(&b.dto),
            connect_evd: Some(&b.conn),
            srq: Some(&srq),
            attr: None,
        })
        .unwrap();
    let ep3 =
        b.ia.create_ep(&EpParams {
            pz: Some(&b.pz),
            recv_evd: Some(&b.dto),
            request_evd: Some(&b.dto),
            connect_evd: Some(&b.conn),
            srq: Some(&srq),
            attr: None,
        })
        .unwrap();
    let sp = b.listen();
    for (a, ep) in [(&a1, &ep2), (&a2, &ep3)] {
        a.connect(&b, sp.conn_qual(), b"");
        b.next_cr().accept(Some(ep), b"").unwrap();
        assert_eq!(a.conn_event().0, EventNumber::Established);
        assert_eq!(b.conn_event().0, EventNumber::Established);
    }
    let buf = b.alloc(16);
    srq.post_recv(&[buf.triplet(0, 8)], Cookie(1)).unwrap();
    srq.post_recv(&[buf.triplet(8, 8)], Cookie(2)).unwrap();
    for (i, a) in [&a1, &a2].into_iter().enumerate() {
        let s = a.alloc(8);
        s.write(0, &[b'a' + i as u8; 8]).unwrap();
        a.ep.post_send(&[s.triplet(0, 8)], Cookie(10), CompletionFlags::DEFAULT)
            .unwrap();
        ok(&a.dto(), 10, DtoOp::Send, 8);
        let c = b.dto();
        ok(&c, 1 + i as u64, DtoOp::Receive, 8);
        assert_eq!(c.ep, [&ep2, &ep3][i].id());
    }
    assert_eq!(buf.to_vec(), b"aaaaaaaabbbbbbbb");
}

#[test]
fn freeing_a_connected_endpoint_disconnects_the_peer() {
    let (a, b) = pair();
    a.ep.free().unwrap();
    assert_eq!(b.conn_event().0, EventNumber::Disconnected);
}

#[test]
fn dup_connect_reaches_the_same_service_point() {
    let a = Node::new();
    let b = Node::new();
    let sp = b.listen();
    a.connect(&b, sp.conn_qual(), b"first");
    b.next_cr().accept(Some(&b.ep), b"").unwrap();
    assert_eq!(a.conn_event().0, EventNumber::Established);
    let ep2 = a.another_ep();
    ep2.dup_connect(&a.ep, wait_t(), b"dup", Qos::BestEffort)
        .unwrap();
    let cr = b.next_cr();
    assert_eq!(&*cr.query().unwrap().private_data, b"dup");
}

#[test]
fn receive_too_small_is_local_length_and_both_sides_break() {
    let (a, b) = pair();
    let src = a.alloc(16);
    let dst = b.alloc(16);
    b.post_recv(&dst, 0, 4, 1);
    a.ep.post_send(&[src.triplet(0, 16)], Cookie(2), CompletionFlags::DEFAULT)
        .unwrap();
    let c = b.dto();
    assert_eq!((c.cookie, c.status), (Cookie(1), DtoStatus::LocalLength));
    let c = a.dto();
    assert_eq!(
        (c.cookie, c.status),
        (Cookie(2), DtoStatus::RemoteResponder)
    );
    assert_eq!(a.conn_event().0, EventNumber::Broken);
    assert_eq!(b.conn_event().0, EventNumber::Broken);
}

fn raw_connect(b: &Node, qual: ConnQual) -> TcpStream {
    let s = TcpStream::connect(SocketAddr::new(
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        u16::try_from(qual.0).unwrap(),
    ))
    .unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    let _ = b;
    s
}

#[test]
fn hostile_bytes_break_only_their_own_connection() {
    let (a, b) = pair();
    let sp = b.listen();
    // Garbage instead of a connection request: no CR, the socket is closed.
    let mut raw = raw_connect(&b, sp.conn_qual());
    raw.write_all(&[0xff; 64]).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(raw.read(&mut buf).unwrap_or(0), 0);
    // A valid request, accepted, followed by garbage: that EP breaks.
    let ep2 =
        b.ia.create_ep(&EpParams {
            pz: Some(&b.pz),
            recv_evd: Some(&b.dto),
            request_evd: Some(&b.dto),
            connect_evd: Some(&b.conn),
            srq: None,
            attr: None,
        })
        .unwrap();
    let mut raw = raw_connect(&b, sp.conn_qual());
    let mut req = Vec::new();
    Frame::ConnReq {
        rnr_timeout_ms: 100,
        qual: sp.conn_qual().0,
        private_data: b"raw",
    }
    .emit(0, &mut req);
    raw.write_all(&req).unwrap();
    let cr = b.next_cr();
    cr.accept(Some(&ep2), b"").unwrap();
    let mut accept = [0u8; 16];
    raw.read_exact(&mut accept).unwrap();
    let mut rtu = Vec::new();
    Frame::Rtu.emit(0, &mut rtu);
    raw.write_all(&rtu).unwrap();
    assert_eq!(b.conn_event().0, EventNumber::Established);
    raw.write_all(&[9u8; 40]).unwrap();
    assert_eq!(b.conn_event().0, EventNumber::Broken);
    // The first connection is untouched.
    let s = a.alloc(4);
    let d = b.alloc(4);
    b.post_recv(&d, 0, 4, 5);
    a.ep.post_send(&[s.triplet(0, 4)], Cookie(6), CompletionFlags::DEFAULT)
        .unwrap();
    ok(&b.dto(), 5, DtoOp::Receive, 4);
    ok(&a.dto(), 6, DtoOp::Send, 4);
}

#[test]
fn abort_a_pending_connect_and_reuse_the_endpoint() {
    let a = Node::new();
    let b = Node::new();
    let sp = b.listen();
    a.connect(&b, sp.conn_qual(), b"one");
    let _cr = b.next_cr();
    a.ep.disconnect(dat::types::CloseFlags::Abrupt).unwrap();
    assert_eq!(a.conn_event().0, EventNumber::Disconnected);
    a.ep.reset().unwrap();
    a.connect(&b, sp.conn_qual(), b"two");
    let cr = b.next_cr();
    assert_eq!(&*cr.query().unwrap().private_data, b"two");
    cr.accept(Some(&b.ep), b"").unwrap();
    assert_eq!(a.conn_event().0, EventNumber::Established);
}

#[test]
fn accepting_a_request_whose_requester_left_fails_cleanly() {
    let a = Node::new();
    let b = Node::new();
    let sp = b.listen();
    a.connect(&b, sp.conn_qual(), b"bye");
    let cr = b.next_cr();
    // The requester goes away before the answer.
    a.ep.free().unwrap_or(());
    drop(a);
    std::thread::sleep(std::time::Duration::from_millis(50));
    match cr.accept(Some(&b.ep), b"") {
        // Either the transport saw the requester leave (INVALID_ADDRESS)...
        Err(e) => assert_eq!(e.kind(), ErrorType::InvalidAddress),
        // ...or the accept raced ahead and the passive side learns it from the stream.
        Ok(()) => {
            let (n, _) = b.conn_event();
            assert!(
                n == EventNumber::AcceptCompletionError || n == EventNumber::Disconnected,
                "{n:?}"
            );
        }
    }
}

#[test]
fn broken_endpoints_reset_and_connect_again() {
    let (a, b) = pair();
    let src = a.alloc(4);
    let mut bad = b.alloc(4).rmr_triplet(0, 4);
    bad.rmr_context ^= 1;
    a.ep.post_rdma_write(
        &[src.triplet(0, 4)],
        Cookie(1),
        bad,
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    assert_eq!(a.dto().status, DtoStatus::RemoteAccess);
    assert_eq!(a.conn_event().0, EventNumber::Broken);
    assert_eq!(b.conn_event().0, EventNumber::Broken);
    a.ep.reset().unwrap();
    b.ep.reset().unwrap();
    pair_with(&a, &b, b"again", b"ok");
    let d = b.alloc(4);
    b.post_recv(&d, 0, 4, 2);
    a.ep.post_send(&[src.triplet(0, 4)], Cookie(3), CompletionFlags::DEFAULT)
        .unwrap();
    ok(&b.dto(), 2, DtoOp::Receive, 4);
}

#[test]
fn many_endpoints_on_one_ia_progress_independently() {
    let a = Node::new();
    let b = Node::new();
    let sp = b.listen();
    let mut pairs = Vec::new();
    for i in 0..8u8 {
        let ea =
            a.ia.create_ep(&EpParams {
                pz: Some(&a.pz),
                recv_evd: Some(&a.dto),
                request_evd: Some(&a.dto),
                connect_evd: Some(&a.conn),
                srq: None,
                attr: None,
            })
            .unwrap();
        let eb =
            b.ia.create_ep(&EpParams {
                pz: Some(&b.pz),
                recv_evd: Some(&b.dto),
                request_evd: Some(&b.dto),
                connect_evd: Some(&b.conn),
                srq: None,
                attr: None,
            })
            .unwrap();
        ea.connect(
            b.ia.attr().ia_address,
            sp.conn_qual(),
            wait_t(),
            &[i],
            Qos::BestEffort,
            dat::ConnectFlags::Default,
        )
        .unwrap();
        let cr = b.next_cr();
        assert_eq!(&*cr.query().unwrap().private_data, &[i]);
        cr.accept(Some(&eb), &[]).unwrap();
        assert_eq!(a.conn_event().0, EventNumber::Established);
        assert_eq!(b.conn_event().0, EventNumber::Established);
        pairs.push((ea, eb));
    }
    let src = a.alloc(8);
    let dst = b.alloc(64);
    for (i, (ea, eb)) in pairs.iter().enumerate() {
        eb.post_recv(
            &[dst.triplet(8 * i as u64, 8)],
            Cookie(i as u64),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
        src.write(0, &[i as u8; 8]).unwrap();
        ea.post_send(
            &[src.triplet(0, 8)],
            Cookie(i as u64),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
        let c = b.dto();
        assert_eq!(
            (c.ep, c.cookie, c.status),
            (eb.id(), Cookie(i as u64), DtoStatus::Success)
        );
        assert_eq!(a.dto().status, DtoStatus::Success);
    }
    let got = dst.to_vec();
    for i in 0..8 {
        assert!(got[8 * i..8 * i + 8].iter().all(|&x| x == i as u8));
    }
}
