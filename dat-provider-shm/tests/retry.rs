//! Retries of a connect that finds nobody listening (`connect_retry_ms`), over real
//! rendezvous sockets; the late listener is another process.

mod common;

use std::time::{Duration, Instant};

use common::*;
use dat::types::{CloseFlags, EventNumber, Timeout};

/// The peer: lets the requester's first attempts find nobody, then listens and accepts.
fn late_listener(dir: &std::path::Path, qual: u64) {
    std::thread::sleep(Duration::from_millis(150));
    let reg = registry(dir, "");
    let s = Side::new(&reg);
    let (_sp, cr_evd) = listen(&s.ia, qual);
    let (cr, pd) = request(&s.ia, &cr_evd);
    assert_eq!(pd, b"early");
    cr.accept(Some(&s.ep), b"late").unwrap();
    assert_eq!(cm(&s.conn).0, EventNumber::Established);
    assert_eq!(cm(&s.conn).0, EventNumber::Disconnected);
    s.ia.close(CloseFlags::Abrupt).unwrap();
}

#[test]
fn peer_entry() {
    if let Some((role, dir, qual)) = peer_args() {
        assert_eq!(role, "late_listener");
        late_listener(&dir, qual);
    }
}

/// dtest's race: the client connects a moment before the server creates its PSP. The
/// refused request is retried and reaches the listener once it exists.
#[test]
fn a_connect_made_before_the_psp_exists_is_established() {
    let dir = scratch("retry-late");
    // A window long enough for a peer process to start on a loaded machine.
    let reg = registry(&dir, ", connect_retry_ms = 10000");
    let s = Side::new(&reg);
    s.connect(5100, b"early", WAIT);
    assert!(
        !entries(&dir).contains(&"5100".to_owned()),
        "nobody listened when the connect was made"
    );
    let mut peer = Peer::spawn("peer_entry", "late_listener", &dir, 5100);
    assert_eq!(cm(&s.conn), (EventNumber::Established, b"late".to_vec()));
    s.ep.disconnect(CloseFlags::Graceful).unwrap();
    assert_eq!(cm(&s.conn).0, EventNumber::Disconnected);
    assert!(peer.join(), "the peer failed");
    s.ia.close(CloseFlags::Abrupt).unwrap();
    assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Nobody ever listens: `NON_PEER_REJECTED` once the window has passed, not before (and
/// not the consumer's `TIMED_OUT`: the window ends first); with no window, the connect's own
/// attempt is the only one.
#[test]
fn nobody_listening_is_non_peer_rejected_after_the_window() {
    let dir = scratch("retry-nobody");
    let reg = registry(&dir, ", connect_retry_ms = 300");
    let s = Side::new(&reg);
    let start = Instant::now();
    s.connect(5101, b"", WAIT);
    assert_eq!(cm(&s.conn).0, EventNumber::NonPeerRejected);
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(300), "{took:?}");
    s.ia.close(CloseFlags::Abrupt).unwrap();

    // No window: a listener made right after the connect returns never sees the request,
    // however slow the machine (an ordering, not a duration: the attempt the connect makes
    // is refused before it returns, and nothing retries it).
    let reg = registry(&dir, ", connect_retry_ms = 0");
    let (s, l) = (Side::new(&reg), Side::new(&reg));
    s.connect(5101, b"", WAIT);
    let (sp, cr_evd) = listen(&l.ia, 5101);
    assert_eq!(cm(&s.conn).0, EventNumber::NonPeerRejected);
    assert!(
        cr_evd.dequeue().is_err(),
        "a connect with no retry window was retried"
    );
    sp.free().unwrap();
    s.ia.close(CloseFlags::Abrupt).unwrap();
    l.ia.close(CloseFlags::Abrupt).unwrap();
    assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A consumer timeout shorter than the window ends the retries with `TIMED_OUT`; a
/// disconnect while retrying ends them too (no request reaches a listener made later).
#[test]
fn a_shorter_consumer_timeout_is_timed_out_and_a_disconnect_stops_the_retries() {
    let dir = scratch("retry-timeout");
    let reg = registry(&dir, ", connect_retry_ms = 10000");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let start = Instant::now();
    a.connect(5102, b"", Timeout(100_000));
    assert_eq!(cm(&a.conn).0, EventNumber::TimedOut);
    // Not before the consumer's 100 ms (and TIMED_OUT, not NON_PEER_REJECTED: the retries
    // stopped at the timeout, long before their 10 s window).
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(100), "{took:?}");

    a.ep.reset().unwrap();
    a.connect(5102, b"", WAIT);
    a.ep.disconnect(CloseFlags::Abrupt).unwrap();
    assert_eq!(cm(&a.conn).0, EventNumber::Disconnected);
    let (_sp, cr_evd) = listen(&b.ia, 5102);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        cr_evd.dequeue().is_err(),
        "a disconnected connect was retried"
    );
    assert!(a.conn.dequeue().is_err(), "no event after DISCONNECTED");
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}
