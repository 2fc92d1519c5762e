//! Retries of a connect that finds nobody listening, on the virtual clock.

use super::*;

const WINDOW: Duration = Duration::from_millis(500);

/// The request the engine has queued: (qualifier, private data).
fn queued_request(s: &mut Side) -> (u64, Vec<u8>) {
    let bytes = s.e.poll_transmit().to_vec();
    s.e.advance_transmit(bytes.len());
    let (req, used) = parse_request(&bytes).unwrap().unwrap();
    assert_eq!(used, bytes.len());
    (req.qual, req.private_data.to_vec())
}

fn no_listener() -> Vec<u8> {
    let mut v = Vec::new();
    encode_no_listener(&mut v);
    v
}

#[test]
fn a_refused_connect_is_retried_with_backoff_then_non_peer_rejected() {
    let t0 = Instant::now();
    let mut s = Side::with_retry(WINDOW);
    s.e.connect(t0, 0xaffab1e, b"pd", None);
    assert_eq!(queued_request(&mut s), (0xaffab1e, b"pd".to_vec()));
    let mut now = t0;
    let mut gaps = Vec::new();
    loop {
        s.e.handle_connect_error(now, TransportError::Refused);
        if let Some(ev) = s.e.poll_event() {
            assert_eq!(ev, Event::Cm(CmFact::NonPeerRejected));
            break;
        }
        // Waiting: no socket wanted, nothing to send, still active.
        assert!(s.e.is_closed() && s.e.is_active());
        assert!(s.e.poll_transmit().is_empty());
        let at = s.e.poll_timeout().expect("a retry is scheduled");
        s.e.handle_timeout(at - Duration::from_micros(1));
        assert!(!s.e.take_reconnect(), "not before the backoff");
        s.e.handle_timeout(at);
        assert!(s.e.take_reconnect());
        assert!(!s.e.take_reconnect(), "once");
        // The same request again, for the new socket.
        assert_eq!(queued_request(&mut s), (0xaffab1e, b"pd".to_vec()));
        gaps.push(at - now);
        now = at;
    }
    let ms = |v: u64| Duration::from_millis(v);
    assert_eq!(
        gaps,
        [10, 20, 40, 80, 100, 100, 100, 50].map(ms),
        "doubling from 10 ms to 100 ms, the last attempt at the window's end"
    );
    assert_eq!(now - t0, WINDOW);
    assert!(s.e.is_closed() && !s.e.is_active());
    assert_eq!(s.e.poll_timeout(), None);
}

#[test]
fn a_listener_that_appears_during_the_window_is_reached() {
    let mut p = Pair::new();
    p.a = Side::with_retry(WINDOW);
    p.a.e.connect(p.now, 45248, b"late", None);
    let _ = queued_request(&mut p.a);
    p.a.e.handle_connect_error(p.now, TransportError::Refused);
    p.advance(Duration::from_millis(10));
    assert!(p.a.e.take_reconnect());
    // The new socket reaches a listener now.
    let bytes = p.a.e.poll_transmit().to_vec();
    p.a.e.advance_transmit(bytes.len());
    let (req, _) = parse_request(&bytes).unwrap().unwrap();
    assert_eq!((req.qual, &*req.private_data), (45248, &b"late"[..]));
    p.b.e.accept(req.rnr_timeout, b"ok");
    p.run();
    assert_eq!(p.a.take(), vec![established(b"ok")]);
    assert_eq!(p.b.take(), vec![established(&[])]);
    assert_eq!(p.a.e.poll_timeout(), None);
}

#[test]
fn a_shorter_consumer_timeout_still_ends_the_retries_with_timed_out() {
    let t0 = Instant::now();
    let mut s = Side::with_retry(WINDOW);
    let deadline = t0 + Duration::from_millis(25);
    s.e.connect(t0, 1, &[], Some(deadline));
    s.e.handle_connect_error(t0, TransportError::Refused);
    s.e.handle_timeout(t0 + Duration::from_millis(10));
    assert!(s.e.take_reconnect());
    s.e.handle_connect_error(t0 + Duration::from_millis(10), TransportError::Refused);
    // The next retry (at 30 ms) is after the consumer's deadline: the deadline is next.
    assert_eq!(s.e.poll_timeout(), Some(deadline));
    s.e.handle_timeout(deadline);
    assert_eq!(s.e.poll_event(), Some(Event::Cm(CmFact::TimedOut)));
    assert!(!s.e.take_reconnect());
    assert_eq!(s.e.poll_timeout(), None);
    assert!(s.e.poll_transmit().is_empty());
}

#[test]
fn no_listener_for_the_qualifier_is_retried_like_a_refusal() {
    let t0 = Instant::now();
    let mut s = Side::with_retry(WINDOW);
    s.e.connect(t0, 7, &[], None);
    let _ = queued_request(&mut s);
    let nl = no_listener();
    assert_eq!(s.e.handle_input(t0, &nl), nl.len());
    assert_eq!(s.e.poll_event(), None);
    assert_eq!(s.e.poll_timeout(), Some(t0 + Duration::from_millis(10)));
    // The socket it came on is given up; its end is no failure.
    assert!(s.e.is_closed());
    s.e.handle_transport_error(TransportError::Lost);
    assert_eq!(s.e.poll_event(), None);
    // Without a retry window: NON_PEER_REJECTED at once.
    let mut s = Side::new();
    s.e.connect(t0, 7, &[], None);
    assert_eq!(s.e.handle_input(t0, &nl), nl.len());
    assert_eq!(s.e.poll_event(), Some(Event::Cm(CmFact::NonPeerRejected)));
    assert!(!s.e.is_active());
}

#[test]
fn no_listener_on_a_connection_is_a_protocol_error() {
    let mut p = Pair::connected();
    p.a.e.handle_input(p.now, &no_listener());
    assert_eq!(p.a.e.poll_event(), Some(Event::Cm(CmFact::Broken)));
}

#[test]
fn other_failures_are_not_retried_and_a_disconnect_ends_the_wait() {
    let t0 = Instant::now();
    for (err, fact) in [
        (TransportError::Unreachable, CmFact::Unreachable),
        (TransportError::Lost, CmFact::NonPeerRejected),
    ] {
        let mut s = Side::with_retry(WINDOW);
        s.e.connect(t0, 1, &[], None);
        s.e.handle_connect_error(t0, err);
        assert_eq!(s.e.poll_event(), Some(Event::Cm(fact)));
    }
    let mut s = Side::with_retry(WINDOW);
    s.e.connect(t0, 1, &[], None);
    s.e.handle_connect_error(t0, TransportError::Refused);
    s.e.disconnect();
    assert_eq!(s.e.poll_event(), Some(Event::Cm(CmFact::Disconnected)));
    s.e.handle_timeout(t0 + WINDOW);
    assert!(!s.e.take_reconnect());
    assert_eq!(s.e.poll_event(), None);
}
