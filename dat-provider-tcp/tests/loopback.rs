//! End-to-end tests of the TCP provider through the `dat` facade, over real loopback sockets.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use common::*;
use dat::types::{
    CloseFlags, CompletionFlags, ConnQual, Cookie, DtoOp, DtoStatus, EventNumber, Qos, Timeout,
};
use dat::{ConnectFlags, ErrorType};

#[test]
fn private_data_travels_both_ways_and_the_cr_names_the_requester() {
    let a = Node::new();
    let b = Node::new();
    let pd_a: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    let pd_b: Vec<u8> = (0..256u32).map(|i| (255 - i) as u8).collect();
    assert!(a.ia.provider_attr().max_private_data_size >= 256);
    let sp = b.listen();
    a.connect(&b, sp.conn_qual(), &pd_a);
    let cr = b.next_cr();
    let q = cr.query().unwrap();
    assert_eq!(&*q.private_data, &pd_a[..]);
    assert_eq!(q.remote_address.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_eq!(q.conn_qual, sp.conn_qual());
    cr.accept(Some(&b.ep), &pd_b).unwrap();
    assert_eq!(a.conn_event(), (EventNumber::Established, pd_b.into()));
    assert_eq!(b.conn_event().0, EventNumber::Established);
    // The IA address is the one peers connect to.
    assert_eq!(
        b.ia.attr().ia_address,
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)
    );
}

#[test]
fn reject_delivers_private_data_in_peer_rejected() {
    let a = Node::new();
    let b = Node::new();
    let sp = b.listen();
    a.connect(&b, sp.conn_qual(), b"please");
    b.next_cr().reject(b"no thanks").unwrap();
    assert_eq!(
        a.conn_event(),
        (EventNumber::PeerRejected, (*b"no thanks").into())
    );
}

#[test]
fn no_listener_is_non_peer_rejected() {
    let a = Node::new();
    // A port nobody listens on (retried for the default window first).
    let local = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
    connect_ep(&a.ep, local, ConnQual(u64::from(free_port())));
    assert_eq!(a.conn_event().0, EventNumber::NonPeerRejected);
}

#[test]
fn unroutable_address_is_unreachable() {
    let a = Node::new();
    // TCP to a multicast address is refused by the local stack (ENETUNREACH): no packet
    // leaves the host.
    a.ep.connect(
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(224, 0, 0, 1)), 0),
        ConnQual(5555),
        wait_t(),
        b"",
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .unwrap();
    assert_eq!(a.conn_event().0, EventNumber::Unreachable);
}

#[test]
fn consumer_timeout_is_timed_out() {
    let a = Node::new();
    let b = Node::new();
    let sp = b.listen();
    // Long enough for the request to reach B first on a loaded machine (with 200 ms a stall
    // could end the connect before B ever saw it, and `next_cr` found nothing).
    a.ep.connect(
        b.ia.attr().ia_address,
        sp.conn_qual(),
        Timeout::from_duration(Duration::from_secs(3)),
        b"",
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .unwrap();
    // B never accepts.
    let _cr = b.next_cr();
    assert_eq!(a.conn_event().0, EventNumber::TimedOut);
}

#[test]
fn send_recv_with_gather_scatter_and_zero_length() {
    let (a, b) = pair();
    let src = a.alloc(64);
    src.write(0, b"abcdefghij").unwrap();
    let dst = b.alloc(64);
    b.ep.post_recv(
        &[dst.triplet(0, 2), dst.triplet(10, 3), dst.triplet(20, 16)],
        Cookie(1),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    b.post_recv(&dst, 40, 8, 2);
    a.ep.post_send(
        &[src.triplet(0, 3), src.triplet(5, 0), src.triplet(6, 4)],
        Cookie(10),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    a.ep.post_send(&[], Cookie(11), CompletionFlags::DEFAULT)
        .unwrap();
    ok(&b.dto(), 1, DtoOp::Receive, 7);
    ok(&b.dto(), 2, DtoOp::Receive, 0);
    ok(&a.dto(), 10, DtoOp::Send, 7);
    ok(&a.dto(), 11, DtoOp::Send, 0);
    let got = dst.to_vec();
    assert_eq!(&got[0..2], b"ab");
    assert_eq!(&got[10..13], b"cgh");
    assert_eq!(&got[20..22], b"ij");
    assert_eq!(&got[40..48], &[0u8; 8]);
}

#[test]
fn rdma_write_and_read_are_one_sided() {
    let (a, b) = pair();
    let n = 300 * 1024;
    let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    let src = a.alloc(n);
    src.write(0, &data).unwrap();
    let target = b.alloc(n);
    let back = a.alloc(n);
    let len = u32::try_from(n).unwrap();
    a.ep.post_rdma_write(
        &[src.triplet(0, len)],
        Cookie(1),
        target.rmr_triplet(0, len),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    a.ep.post_rdma_read(
        &[back.triplet(0, 100), back.triplet(100, len - 100)],
        Cookie(2),
        target.rmr_triplet(0, len),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    ok(&a.dto(), 1, DtoOp::RdmaWrite, len);
    ok(&a.dto(), 2, DtoOp::RdmaRead, len);
    assert_eq!(target.to_vec(), data);
    assert_eq!(back.to_vec(), data);
    // The target's application saw nothing.
    assert!(b.dto.dequeue().is_err());
}

#[test]
fn bad_rkey_is_remote_access_and_breaks_both_sides_touching_nothing() {
    let (a, b) = pair();
    let src = a.alloc(16);
    src.write(0, &[0xaa; 16]).unwrap();
    let target = b.alloc(16);
    target.write(0, &[0x55; 16]).unwrap();
    let recv = a.alloc(4);
    a.post_recv(&recv, 0, 4, 7);
    let mut bad = target.rmr_triplet(0, 16);
    bad.rmr_context ^= 0x1234_5678;
    a.ep.post_rdma_write(
        &[src.triplet(0, 16)],
        Cookie(1),
        bad,
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    let c = a.dto();
    assert_eq!((c.cookie, c.status), (Cookie(1), DtoStatus::RemoteAccess));
    assert_eq!(a.conn_event().0, EventNumber::Broken);
    let f = a.dto();
    assert_eq!((f.cookie, f.status), (Cookie(7), DtoStatus::Flushed));
    assert_eq!(b.conn_event().0, EventNumber::Broken);
    assert_eq!(target.to_vec(), vec![0x55; 16]);
}

#[test]
fn disconnect_is_seen_on_both_sides() {
    let (a, b) = pair();
    let r = b.alloc(8);
    b.post_recv(&r, 0, 8, 3);
    a.ep.disconnect(CloseFlags::Graceful).unwrap();
    assert_eq!(a.conn_event().0, EventNumber::Disconnected);
    assert_eq!(b.conn_event().0, EventNumber::Disconnected);
    let f = b.dto();
    assert_eq!((f.cookie, f.status), (Cookie(3), DtoStatus::Flushed));
    // Both EPs can be reset and connected again.
    a.ep.reset().unwrap();
    b.ep.reset().unwrap();
    pair_with(&a, &b, b"again", b"yes");
}

#[test]
fn receiver_not_ready_after_the_configured_timeout() {
    let a = Node::with_params("address = \"127.0.0.1\", rnr_timeout_ms = 100");
    let b = Node::new();
    pair_with(&a, &b, b"", b"");
    let src = a.alloc(4);
    a.ep.post_send(&[src.triplet(0, 4)], Cookie(1), CompletionFlags::DEFAULT)
        .unwrap();
    let c = a.dto();
    assert_eq!(
        (c.cookie, c.status),
        (Cookie(1), DtoStatus::ReceiverNotReady)
    );
    assert_eq!(a.conn_event().0, EventNumber::Broken);
    assert_eq!(b.conn_event().0, EventNumber::Broken);
}

#[test]
fn ipv6_loopback_works() {
    let a = Node::with_params("address = \"::1\"");
    let b = Node::with_params("address = \"::1\"");
    pair_with(&a, &b, b"six", b"v6");
    let src = a.alloc(8);
    let dst = b.alloc(8);
    src.write(0, b"ipv6ipv6").unwrap();
    b.post_recv(&dst, 0, 8, 1);
    a.ep.post_send(&[src.triplet(0, 8)], Cookie(2), CompletionFlags::DEFAULT)
        .unwrap();
    ok(&b.dto(), 1, DtoOp::Receive, 8);
    assert_eq!(dst.to_vec(), b"ipv6ipv6");
    // An IPv4 peer address on an IPv6 IA is refused at once.
    let c = Node::new();
    let e =
        a.ep.connect(
            c.ia.attr().ia_address,
            ConnQual(1),
            wait_t(),
            b"",
            Qos::BestEffort,
            ConnectFlags::Default,
        )
        .unwrap_err();
    assert!(e.kind() == ErrorType::InvalidAddress || e.kind() == ErrorType::InvalidState);
}

#[test]
fn unknown_params_are_open_errors_naming_key_and_origin() {
    let e = registry("address = \"127.0.0.1\", bogus = 1")
        .open_ia(Some("t"), 8)
        .unwrap_err();
    assert_eq!(e.code().kind(), ErrorType::InvalidParameter);
    assert!(e.message().contains("params.bogus"), "{}", e.message());
    assert!(e.message().contains("embedded"), "{}", e.message());
}

#[test]
fn listens_only_on_the_configured_address() {
    let b = Node::new();
    let sp = b.listen();
    let port = u16::try_from(sp.conn_qual().0).unwrap();
    // 127.0.0.2 is loopback too but not the IA's address: nobody listens there.
    let r = std::net::TcpStream::connect_timeout(
        &SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), port),
        Duration::from_secs(2),
    );
    assert!(r.is_err());
    let r = std::net::TcpStream::connect_timeout(
        &SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
        Duration::from_secs(2),
    );
    assert!(r.is_ok());
}

/// The target application polls for a while (its driver steps back), then stops: the driver
/// must take the socket back and serve one-sided reads with no call from the target.
#[test]
fn driver_takes_over_when_the_application_stops_polling() {
    let (a, b) = pair();
    let target = b.alloc(64);
    target.write(0, &[0x42; 64]).unwrap();
    let back = a.alloc(64);
    // Phase 1: B polls while A reads.
    for i in 0..20u64 {
        a.ep.post_rdma_read(
            &[back.triplet(0, 64)],
            Cookie(i),
            target.rmr_triplet(0, 64),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
        let until = std::time::Instant::now() + Duration::from_millis(2);
        while std::time::Instant::now() < until {
            let _ = b.dto.dequeue();
        }
        ok(&a.dto(), i, DtoOp::RdmaRead, 64);
    }
    // Phase 2: B's application sleeps; reads are still answered.
    std::thread::sleep(Duration::from_millis(5));
    for i in 100..105u64 {
        a.ep.post_rdma_read(
            &[back.triplet(0, 64)],
            Cookie(i),
            target.rmr_triplet(0, 64),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
        ok(&a.dto(), i, DtoOp::RdmaRead, 64);
    }
    assert_eq!(back.to_vec(), vec![0x42; 64]);
}

/// `port_base` travels in the IA address: qualifier q of an IA with port base B listens on
/// TCP port B + q, and a peer with another port base reaches it through that address.
#[test]
fn port_base_maps_qualifiers_to_ports() {
    let a = Node::new();
    let b = Node::with_params("address = \"127.0.0.1\", port_base = 1000");
    assert_eq!(b.ia.attr().ia_address.port(), 1000);
    let sp = b.listen();
    let port = u16::try_from(sp.conn_qual().0 + 1000).unwrap();
    assert!(
        std::net::TcpStream::connect(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
            .is_ok()
    );
    // (That raw connection sent no request: it never becomes a CR.)
    a.connect(&b, sp.conn_qual(), b"based");
    let cr = b.next_cr();
    assert_eq!(&*cr.query().unwrap().private_data, b"based");
}

#[test]
fn closing_the_ia_stops_its_driver() {
    let (a, _b) = pair();
    a.ia.close(CloseFlags::Abrupt).unwrap();
    assert!(a.ia.is_closed());
}

/// A long stream of 1 MiB writes, eight in flight: pumps stop at their budget and hand the
/// rest to the driver, nothing stalls, the last write's bytes are all there.
#[test]
fn a_long_write_stream_completes() {
    let (a, b) = pair();
    let n = 1 << 20;
    let src = a.alloc(n);
    let target = b.alloc(n);
    let len = u32::try_from(n).unwrap();
    let mut posted = 0u64;
    let mut done = 0u64;
    while done < 48 {
        while posted < 48 && posted - done < 8 {
            src.write(0, &[posted as u8; 16]).unwrap();
            a.ep.post_rdma_write(
                &[src.triplet(0, len)],
                Cookie(posted),
                target.rmr_triplet(0, len),
                CompletionFlags::DEFAULT,
            )
            .unwrap();
            posted += 1;
        }
        ok(&a.dto(), done, DtoOp::RdmaWrite, len);
        done += 1;
    }
    let got = target.to_vec();
    assert_eq!(got.len(), n);
    assert!(got[16..].iter().all(|&x| x == 0));
}

/// A ping-pong whose sends are all suppressed: the engine reports their retirement to the
/// facade only when asked (`retired_unreported`) or before a later request's completion or
/// the end of the connection, and `dat_ep_get_status` still finds the requester idle once
/// the replies came back.
#[test]
fn suppressed_sends_of_a_ping_pong_leave_the_endpoint_idle() {
    let (a, b) = pair();
    let (la, lb) = (a.alloc(64), b.alloc(64));
    for i in 0..20u64 {
        b.post_recv(&lb, 0, 64, i);
        a.post_recv(&la, 0, 64, i);
        a.ep.post_send(&[la.triplet(0, 8)], Cookie(i), CompletionFlags::SUPPRESS)
            .unwrap();
        ok(&b.dto(), i, DtoOp::Receive, 8);
        b.ep.post_send(&[lb.triplet(0, 8)], Cookie(i), CompletionFlags::SUPPRESS)
            .unwrap();
        ok(&a.dto(), i, DtoOp::Receive, 8);
    }
    // Each reply acknowledged the send before it; none of a's requests had a completion of
    // its own, so the count of the twenty comes from the provider on demand. (b's last send
    // stays outstanding until a's next frame acknowledges it.)
    let st = a.ep.status().unwrap();
    assert_eq!((st.requests, st.recvs), (0, 0), "{st:?}");
    assert_eq!(b.ep.status().unwrap().recvs, 0);
    // A later request's completion comes with the count, and so does the disconnect.
    a.post_recv(&la, 0, 64, 99);
    b.ep.post_send(&[lb.triplet(0, 8)], Cookie(98), CompletionFlags::DEFAULT)
        .unwrap();
    ok(&b.dto(), 98, DtoOp::Send, 8);
    ok(&a.dto(), 99, DtoOp::Receive, 8);
    assert_eq!(b.ep.status().unwrap().requests, 0);
    a.ep.disconnect(CloseFlags::Abrupt).unwrap();
    assert_eq!(a.conn_event().0, EventNumber::Disconnected);
    assert_eq!(b.conn_event().0, EventNumber::Disconnected);
    for n in [&a, &b] {
        let st = n.ep.status().unwrap();
        assert_eq!((st.requests, st.recvs), (0, 0), "{st:?}");
    }
}
