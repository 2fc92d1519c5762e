//! Connection management, malformed input, loss of the stream, disconnect and reuse.

use super::*;

#[test]
fn connect_and_accept_carry_private_data_both_ways() {
    let pd_a: Vec<u8> = (0..=255u8).chain(0..44).collect();
    let pd_b: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    let p = Pair::connect_with(&pd_a, &pd_b);
    assert_eq!(p.a.e.poll_timeout(), None);
}

/// The requester reports its connection established only once the acceptor has reported
/// its own (`Accept`, `Rtu`, then `Confirm`), so nothing the requester's consumer does next can
/// reach the acceptor before its `Established`.
#[test]
fn the_requester_is_established_after_the_acceptor() {
    let mut a = Side::new();
    let mut b = Side::new();
    a.e.connect(Instant::now(), 1, b"req", None);
    let req = a.e.poll_transmit().to_vec();
    a.e.advance_transmit(req.len());
    assert!(parse_request(&req).unwrap().is_some());
    b.e.accept(RNR, b"acc");
    let acc = b.e.poll_transmit().to_vec();
    b.e.advance_transmit(acc.len());
    assert_eq!(a.e.handle_input(Instant::now(), &acc), acc.len());
    assert_eq!(
        a.e.poll_event(),
        None,
        "nothing before the acceptor confirms"
    );
    assert!(!a.e.is_connected());
    let rtu = a.e.poll_transmit().to_vec();
    a.e.advance_transmit(rtu.len());
    assert_eq!(b.e.handle_input(Instant::now(), &rtu), rtu.len());
    assert_eq!(b.e.poll_event(), Some(established(b"")));
    assert!(
        b.e.poll_transmit().is_empty(),
        "the confirm waits for the report"
    );
    assert!(b.e.is_confirm_held());
    b.e.release_confirm();
    let confirm = b.e.poll_transmit().to_vec();
    b.e.advance_transmit(confirm.len());
    assert_eq!(
        Frame::parse(&confirm).unwrap().map(|d| d.frame),
        Some(Frame::Confirm)
    );
    assert_eq!(a.e.handle_input(Instant::now(), &confirm), confirm.len());
    assert_eq!(a.e.poll_event(), Some(established(b"acc")));
    assert!(a.e.is_connected() && b.e.is_connected());
}

/// A `Confirm` before any `Accept`, or a second `Accept`, is a protocol error.
#[test]
fn confirm_out_of_turn_refuses_the_connection() {
    let mut confirm = Vec::new();
    Frame::Confirm.emit(0, &mut confirm);
    let mut acc = Vec::new();
    Frame::Accept {
        rnr_timeout_ms: 1,
        private_data: &[],
    }
    .emit(0, &mut acc);
    let mut twice = acc.clone();
    twice.extend_from_slice(&acc);
    for input in [&confirm, &twice] {
        let mut s = Side::new();
        s.e.connect(Instant::now(), 1, &[], None);
        s.e.handle_input(Instant::now(), input);
        assert_eq!(s.e.poll_event(), Some(Event::Cm(CmFact::NonPeerRejected)));
        assert!(s.e.is_closed());
    }
}

#[test]
fn reject_carries_private_data_and_returns_to_idle() {
    let mut p = Pair::new();
    let mut recvbuf = Side::new();
    let lmr = recvbuf.register(&[0; 8]);
    p.a.e.post(recvbuf.wr(PostOp::Recv, &[tri(lmr, 0, 8)], 1));
    p.a.e.connect(p.now, 7, b"x", None);
    let mut rej = Vec::new();
    encode_reject(b"go away", &mut rej);
    let used = p.a.e.handle_input(p.now, &rej);
    assert_eq!(used, rej.len());
    assert_eq!(
        p.a.e.poll_event(),
        Some(Event::Cm(CmFact::PeerRejected {
            private_data: (*b"go away").into()
        }))
    );
    // The receive posted before connecting is kept (not flushed) for the next attempt.
    assert_eq!(p.a.e.poll_event(), None);
    assert!(p.a.e.is_closed() && !p.a.e.is_active());
    assert!(p.a.e.poll_transmit().is_empty());
}

#[test]
fn connect_timeout_fires_at_the_deadline_only() {
    let mut p = Pair::new();
    let deadline = p.now + Duration::from_millis(100);
    p.a.e.connect(p.now, 1, &[], Some(deadline));
    assert_eq!(p.a.e.poll_timeout(), Some(deadline));
    p.advance(Duration::from_millis(99));
    assert!(p.a.take().is_empty());
    p.advance(Duration::from_millis(1));
    assert_eq!(p.a.take(), vec![Event::Cm(CmFact::TimedOut)]);
    assert_eq!(p.a.e.poll_timeout(), None);
    assert!(p.a.e.is_closed());
    // A late accept after the timeout is an unexpected frame: ignored by a closed engine.
    let mut acc = Vec::new();
    Frame::Accept {
        rnr_timeout_ms: 1,
        private_data: &[],
    }
    .emit(0, &mut acc);
    assert_eq!(p.a.e.handle_input(p.now, &acc), 0);
    assert_eq!(p.a.e.poll_event(), None);
}

#[test]
fn transport_failures_while_connecting() {
    for (err, fact) in [
        (TransportError::Refused, CmFact::NonPeerRejected),
        (TransportError::Unreachable, CmFact::Unreachable),
        (TransportError::Lost, CmFact::NonPeerRejected),
    ] {
        let mut s = Side::new();
        s.e.connect(Instant::now(), 1, &[], None);
        s.e.handle_transport_error(err);
        assert_eq!(s.e.poll_event(), Some(Event::Cm(fact)));
        assert!(s.e.poll_transmit().is_empty());
    }
    // The passive side losing the requester before the RTU.
    let mut s = Side::new();
    s.e.accept(RNR, b"pd");
    s.e.handle_transport_error(TransportError::Lost);
    assert_eq!(
        s.e.poll_event(),
        Some(Event::Cm(CmFact::AcceptCompletionError))
    );
}

#[test]
fn unexpected_first_answer_is_a_non_peer_reject() {
    let mut s = Side::new();
    s.e.connect(Instant::now(), 1, &[], None);
    let mut rtu = Vec::new();
    Frame::Rtu.emit(0, &mut rtu);
    s.e.handle_input(Instant::now(), &rtu);
    assert_eq!(s.e.poll_event(), Some(Event::Cm(CmFact::NonPeerRejected)));
    // A request that is not a ConnReq is refused by the passive parser.
    assert!(parse_request(&rtu).is_err());
    assert_eq!(parse_request(&rtu[..5]), Ok(None));
}

#[test]
fn malformed_frame_breaks_the_connection_and_flushes() {
    let mut p = Pair::connected();
    let src = p.a.register(b"x");
    let dst = p.a.register(&[0u8; 1]);
    p.a.e.post(p.a.wr(PostOp::Recv, &[tri(dst, 0, 1)], 1));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 1)], 2));
    let _ = p.a.e.poll_transmit();
    for garbage in [
        &[0xffu8; 12][..],
        &[6, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0],
    ] {
        let mut s = Pair::connected();
        s.a.e.handle_input(s.now, garbage);
        assert_eq!(s.a.e.poll_event(), Some(Event::Cm(CmFact::Broken)));
    }
    // A well-formed frame out of sequence (a piece without a first piece) breaks too.
    let mut bad = Vec::new();
    Frame::Send {
        msn: 1,
        total: 4,
        flags: wire::LAST,
        payload: b"abcd",
    }
    .emit(0, &mut bad);
    p.a.e.handle_input(p.now, &bad);
    let evs: Vec<Event> = std::iter::from_fn(|| p.a.e.poll_event()).collect();
    assert_eq!(
        evs,
        vec![
            Event::Cm(CmFact::Broken),
            done(2, DtoStatus::Flushed, 0, DtoOp::Send),
            done(1, DtoStatus::Flushed, 0, DtoOp::Receive),
        ]
    );
    assert!(p.a.e.is_closed());
    // An acknowledgement of a request never sent breaks a connection as well.
    let mut q = Pair::connected();
    let mut ack = Vec::new();
    Frame::Ack.emit(5, &mut ack);
    q.a.e.handle_input(q.now, &ack);
    assert_eq!(q.a.e.poll_event(), Some(Event::Cm(CmFact::Broken)));
}

#[test]
fn abrupt_disconnect_reports_successes_first_then_flushes() {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcd");
    let dst = p.b.register(&[0u8; 8]);
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, 4)], 1));
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 4, 4)], 2));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 3));
    p.run();
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 4));
    p.a.e.disconnect();
    p.run();
    assert_eq!(
        p.a.take(),
        vec![
            done(3, DtoStatus::Success, 4, DtoOp::Send),
            Event::Cm(CmFact::Disconnected),
            done(4, DtoStatus::Flushed, 0, DtoOp::Send),
        ]
    );
    // B executed the send that went out before the Disconnect; the second send was still
    // queued at A and was flushed there (as a QP moved to the error state flushes).
    assert_eq!(
        p.b.take(),
        vec![
            done(1, DtoStatus::Success, 4, DtoOp::Receive),
            Event::Cm(CmFact::Disconnected),
            done(2, DtoStatus::Flushed, 0, DtoOp::Receive),
        ]
    );
    assert!(p.a.e.is_closed() && p.b.e.is_closed());
    assert!(p.a.e.poll_transmit().is_empty());
}

#[test]
fn graceful_disconnect_completes_outstanding_requests_before_disconnected() {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcdefgh");
    let dst = p.b.register(&[0u8; 16]);
    let back = p.a.register(&[0u8; 4]);
    let a_recv = p.a.register(&[0u8; 4]);
    for i in 0..3 {
        p.b.e
            .post(p.b.wr(PostOp::Recv, &[tri(dst, i * 4, 4)], 10 + i));
    }
    p.a.e.post(p.a.wr(PostOp::Recv, &[tri(a_recv, 0, 4)], 30));
    // Posted, none transmitted yet: two sends, an RDMA write, an RDMA read.
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 1));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 4, 4)], 2));
    p.a.e
        .post(p.a.wr(PostOp::RdmaWrite(rtri(dst, 12, 4)), &[tri(src, 0, 4)], 3));
    p.a.e
        .post(p.a.wr(PostOp::RdmaRead(rtri(dst, 4, 4)), &[tri(back, 0, 4)], 4));
    p.a.e.disconnect_graceful(p.now, Duration::from_secs(1));
    assert!(p.a.e.is_draining() && p.a.e.is_connected());
    assert_eq!(
        p.a.take(),
        vec![],
        "nothing is reported before the acknowledgements"
    );
    p.run();
    assert_eq!(
        p.a.take(),
        vec![
            done(1, DtoStatus::Success, 4, DtoOp::Send),
            done(2, DtoStatus::Success, 4, DtoOp::Send),
            done(3, DtoStatus::Success, 4, DtoOp::RdmaWrite),
            done(4, DtoStatus::Success, 4, DtoOp::RdmaRead),
            Event::Cm(CmFact::Disconnected),
            done(30, DtoStatus::Flushed, 0, DtoOp::Receive),
        ]
    );
    assert_eq!(&p.a.read(back.0), b"efgh");
    assert_eq!(
        p.b.take(),
        vec![
            done(10, DtoStatus::Success, 4, DtoOp::Receive),
            done(11, DtoStatus::Success, 4, DtoOp::Receive),
            Event::Cm(CmFact::Disconnected),
            done(12, DtoStatus::Flushed, 0, DtoOp::Receive),
        ]
    );
    assert_eq!(&p.b.read(dst.0)[..16], b"abcdefgh\0\0\0\0abcd");
    assert!(p.a.e.is_closed() && p.b.e.is_closed());
}

#[test]
fn graceful_disconnect_without_outstanding_requests_is_immediate() {
    let mut p = Pair::connected();
    let a_recv = p.a.register(&[0u8; 4]);
    p.a.e.post(p.a.wr(PostOp::Recv, &[tri(a_recv, 0, 4)], 30));
    p.a.e.disconnect_graceful(p.now, Duration::from_secs(1));
    assert!(!p.a.e.is_draining() && p.a.e.is_closed());
    p.run();
    assert_eq!(
        p.a.take(),
        vec![
            Event::Cm(CmFact::Disconnected),
            done(30, DtoStatus::Flushed, 0, DtoOp::Receive),
        ]
    );
    assert_eq!(p.b.take(), vec![Event::Cm(CmFact::Disconnected)]);
}

#[test]
fn graceful_disconnect_gives_up_on_a_silent_peer_at_the_deadline() {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcd");
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 1));
    let limit = Duration::from_secs(2);
    p.a.e.disconnect_graceful(p.now, limit);
    assert_eq!(p.a.e.poll_timeout(), Some(p.now + limit));
    // The peer never answers: nothing is delivered to B.
    let n = p.a.e.poll_transmit().len();
    assert!(n > 0);
    p.a.e.advance_transmit(n);
    p.advance(limit - Duration::from_millis(1));
    assert_eq!(p.a.take(), vec![], "still waiting before the deadline");
    assert!(p.a.e.is_connected());
    p.advance(Duration::from_millis(1));
    assert_eq!(
        p.a.take(),
        vec![
            Event::Cm(CmFact::Disconnected),
            done(1, DtoStatus::Flushed, 0, DtoOp::Send),
        ]
    );
    assert!(p.a.e.is_closed());
    assert_eq!(p.a.e.poll_timeout(), None);
    // The Disconnect still goes out.
    let mut out = Vec::new();
    out.extend_from_slice(p.a.e.poll_transmit());
    assert!(matches!(
        Frame::parse(&out),
        Ok(Some(wire::Decoded {
            frame: Frame::Disconnect,
            ..
        }))
    ));
}

#[test]
fn graceful_disconnect_reports_a_refused_send_then_disconnected() {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcd");
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 1));
    p.a.e.disconnect_graceful(p.now, Duration::from_secs(60));
    p.run();
    assert_eq!(p.a.take(), vec![], "the send waits at B for a receive");
    p.advance(RNR);
    p.run();
    assert_eq!(
        p.a.take(),
        vec![
            done(1, DtoStatus::ReceiverNotReady, 0, DtoOp::Send),
            Event::Cm(CmFact::Disconnected),
        ]
    );
    assert_eq!(p.b.take(), vec![Event::Cm(CmFact::Broken)]);
}

#[test]
fn graceful_disconnect_meets_the_peers_disconnect() {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcd");
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 1));
    p.a.e.disconnect_graceful(p.now, Duration::from_secs(1));
    // B disconnects first (its send has no receive yet): A's send is flushed after the fact.
    p.b.e.disconnect();
    p.run();
    assert_eq!(
        p.a.take(),
        vec![
            Event::Cm(CmFact::Disconnected),
            done(1, DtoStatus::Flushed, 0, DtoOp::Send),
        ]
    );
    assert_eq!(p.b.take(), vec![Event::Cm(CmFact::Disconnected)]);
}

#[test]
fn lost_stream_breaks_and_flushes_in_posting_order() {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcd");
    let dst = p.a.register(&[0u8; 4]);
    p.a.e.post(p.a.wr(PostOp::Recv, &[tri(dst, 0, 4)], 1));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 2));
    p.a.e
        .post(p.a.wr(PostOp::RdmaWrite(rtri(src, 0, 4)), &[tri(src, 0, 4)], 3));
    p.a.e.handle_transport_error(TransportError::Lost);
    let evs: Vec<Event> = std::iter::from_fn(|| p.a.e.poll_event()).collect();
    assert_eq!(
        evs,
        vec![
            Event::Cm(CmFact::Broken),
            done(2, DtoStatus::Flushed, 0, DtoOp::Send),
            done(3, DtoStatus::Flushed, 0, DtoOp::RdmaWrite),
            done(1, DtoStatus::Flushed, 0, DtoOp::Receive),
        ]
    );
    // Posts after the loss are flushed at once.
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 4));
    assert_eq!(
        p.a.e.poll_event(),
        Some(done(4, DtoStatus::Flushed, 0, DtoOp::Send))
    );
}

#[test]
fn keepalive_is_harmless_and_reset_allows_a_new_connection() {
    let mut p = Pair::connected();
    let mut ka = Vec::new();
    Frame::Keepalive.emit(0, &mut ka);
    assert_eq!(p.a.e.handle_input(p.now, &ka), ka.len());
    assert_eq!(p.a.e.poll_event(), None);
    p.a.e.disconnect();
    p.run();
    assert_eq!(p.a.take(), vec![Event::Cm(CmFact::Disconnected)]);
    assert_eq!(p.b.take(), vec![Event::Cm(CmFact::Disconnected)]);
    // Reuse both ends for a second connection.
    p.a.e.reset();
    p.b.e.reset();
    p.a.e.connect(p.now, 2, b"again", None);
    let bytes = p.a.e.poll_transmit().to_vec();
    p.a.e.advance_transmit(bytes.len());
    let (req, _) = parse_request(&bytes).unwrap().unwrap();
    p.b.e.accept(req.rnr_timeout, b"ok");
    p.run();
    assert_eq!(p.a.take(), vec![established(b"ok")]);
    assert_eq!(
        p.one_send(1, 2),
        vec![done(2, DtoStatus::Success, 1, DtoOp::Send)]
    );
}

#[test]
fn random_frames_into_a_connected_engine_never_panic() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..300 {
        let mut p = Pair::connected();
        let dst = p.a.register(&[0u8; 64]);
        p.a.e.post(p.a.wr(PostOp::Recv, &[tri(dst, 0, 64)], 1));
        let mut input = Vec::new();
        for _ in 0..8 {
            let payload: Vec<u8> = (0..next() % 80).map(|_| next().to_le_bytes()[0]).collect();
            let msn = (next() % 4) as u32;
            let total = (next() % 100) as u32;
            let flags = (next() % 8) as u8;
            let f = match next() % 7 {
                0 => Frame::Send {
                    msn,
                    total: total.max(payload.len() as u32),
                    flags: flags & (wire::FIRST | wire::LAST),
                    payload: &payload,
                },
                1 => Frame::RdmaWrite {
                    msn,
                    total: total.max(payload.len() as u32),
                    rkey: next() as u32,
                    addr: dst.2 + next() % 128,
                    flags: flags & (wire::FIRST | wire::LAST),
                    payload: &payload,
                },
                2 => Frame::ReadReq {
                    msn,
                    len: total,
                    rkey: next() as u32,
                    addr: next(),
                },
                3 => Frame::ReadResp {
                    msn,
                    total: total.max(payload.len() as u32),
                    flags: flags & (wire::FIRST | wire::LAST),
                    payload: &payload,
                },
                4 => Frame::Nak {
                    msn,
                    status: 2 + (next() % 11) as u32,
                },
                5 => Frame::Ack,
                _ => Frame::Keepalive,
            };
            let mut one = Vec::new();
            f.emit((next() % 3) as u32, &mut one);
            if round % 5 == 0 && !one.is_empty() {
                let at = (next() as usize) % one.len();
                one[at] ^= next().to_le_bytes()[0];
            }
            input.extend_from_slice(&one);
        }
        let used = p.a.e.handle_input(p.now, &input);
        assert!(used <= input.len());
        p.a.e.handle_timeout(p.now + Duration::from_secs(60));
        let _ = p.a.e.poll_transmit();
        while p.a.e.poll_event().is_some() {}
    }
}
