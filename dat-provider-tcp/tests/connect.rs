//! Connection establishment over real loopback sockets: retries of a connect that finds
//! nobody listening, and qualifiers beyond the port space.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use common::*;
use dat::ErrorType;
use dat::types::{ConnQual, EventNumber, PspFlags};

/// dtest's race: its client may connect a moment before its server creates the PSP. The
/// refused connect is retried and reaches the listener once it exists.
#[test]
fn a_connect_made_before_the_listener_exists_is_established() {
    // A retry window far past the pause below: with the default (500 ms) a loaded machine
    // that stalls this thread between the connect and the listen ends the retries first.
    let a = Node::with_params("address = \"127.0.0.1\", connect_retry_ms = 30000");
    let b = Node::new();
    let qual = ConnQual(u64::from(free_port()));
    a.connect(&b, qual, b"early");
    std::thread::sleep(Duration::from_millis(120));
    let _sp = b.ia.create_psp(qual, &b.cr, PspFlags::Consumer).unwrap();
    let cr = b.next_cr();
    assert_eq!(&*cr.query().unwrap().private_data, b"early");
    cr.accept(Some(&b.ep), b"late").unwrap();
    assert_eq!(
        a.conn_event(),
        (EventNumber::Established, (*b"late").into())
    );
    assert_eq!(b.conn_event().0, EventNumber::Established);
}

/// Nobody ever listens: NON_PEER_REJECTED once the retry window has passed, not before.
#[test]
fn nobody_listening_is_non_peer_rejected_after_the_retry_window() {
    let a = Node::with_params("address = \"127.0.0.1\", connect_retry_ms = 300");
    let start = Instant::now();
    let local = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
    connect_ep(&a.ep, local, ConnQual(u64::from(free_port())));
    assert_eq!(a.conn_event().0, EventNumber::NonPeerRejected);
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
}

/// Qualifiers beyond the port space (dapltest's `0xaffab1e + n`) fold onto ports; the
/// request carries the whole qualifier, so a connect meant for another qualifier on the
/// same port finds nobody, and two service points cannot share a port.
#[test]
fn large_qualifiers_fold_onto_ports_and_requests_name_their_qualifier() {
    let a = Node::with_params("address = \"127.0.0.1\", connect_retry_ms = 50");
    let b = Node::new();
    // Two qualifiers far beyond 65535 that fold onto the same free port (span 64512).
    let port = loop {
        let p = free_port();
        if p >= 1024 {
            break p;
        }
    };
    let q1 = ConnQual(u64::from(port - 1024) + 64_512 * 2_860);
    let q2 = ConnQual(q1.0 + 64_512);
    let sp = b.ia.create_psp(q1, &b.cr, PspFlags::Consumer).unwrap();
    assert_eq!(sp.conn_qual(), q1);
    assert!(
        std::net::TcpStream::connect(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
            .is_ok(),
        "q1 listens on the folded port"
    );
    let e = b.ia.create_psp(q2, &b.cr, PspFlags::Consumer).unwrap_err();
    assert_eq!(e.kind(), ErrorType::ConnQualInUse, "{e}");
    // A connect for q2 reaches q1's listener, which says nobody serves q2.
    connect_ep(&a.ep, b.ia.attr().ia_address, q2);
    assert_eq!(a.conn_event().0, EventNumber::NonPeerRejected);
    // q1 itself is served.
    let ep2 = a.another_ep();
    connect_ep(&ep2, b.ia.attr().ia_address, q1);
    let cr = b.next_cr();
    assert_eq!(cr.query().unwrap().conn_qual, q1);
    cr.accept(Some(&b.ep), b"").unwrap();
    assert_eq!(a.conn_event().0, EventNumber::Established);
    assert_eq!(b.conn_event().0, EventNumber::Established);
    // The q2 attempt never showed up as a request.
    assert!(b.cr.dequeue().is_err());
}
