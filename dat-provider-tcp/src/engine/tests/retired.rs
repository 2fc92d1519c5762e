//! Successful completions of suppressed requests: counted, held back, and reported as one
//! [`Event::Retired`] before a later request's completion or at the end of the connection,
//! whichever end it is.

use super::*;

/// A connected pair where A's `n` suppressed sends have completed (B took them and
/// acknowledged) with nothing reported yet.
fn quiet_sends(n: u64) -> Pair {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcd");
    let dst = p.b.register(&[0u8; 64]);
    for i in 0..n {
        p.b.e
            .post(p.b.wr(PostOp::Recv, &[tri(dst, i * 4, 4)], 100 + i));
        let mut wr = p.a.wr(PostOp::Send, &[tri(src, 0, 4)], i);
        wr.flags = CompletionFlags::SUPPRESS;
        p.a.e.post(wr);
    }
    p.run();
    assert_eq!(p.b.take().len(), n as usize);
    assert_eq!(p.a.take(), vec![], "held back, not reported");
    assert_eq!(p.a.e.retired_unreported(), n);
    p
}

fn drain(s: &mut Side) -> Vec<Event> {
    s.events.extend(std::iter::from_fn(|| s.e.poll_event()));
    s.take()
}

#[test]
fn a_later_requests_completion_reports_the_count_first() {
    let mut p = quiet_sends(3);
    assert_eq!(
        p.one_send(9, 7),
        vec![
            Event::Retired(3),
            done(7, DtoStatus::Success, 1, DtoOp::Send)
        ]
    );
    assert_eq!(p.a.e.retired_unreported(), 0);
    // A receive's completion is no request's: it does not report the count.
    let mut q = quiet_sends(2);
    let back = q.a.register(&[0u8; 4]);
    let src = q.b.register(b"abcd");
    q.a.e.post(q.a.wr(PostOp::Recv, &[tri(back, 0, 4)], 5));
    let mut wr = q.b.wr(PostOp::Send, &[tri(src, 0, 4)], 6);
    wr.flags = CompletionFlags::SUPPRESS;
    q.b.e.post(wr);
    q.run();
    assert_eq!(
        q.a.take(),
        vec![done(5, DtoStatus::Success, 4, DtoOp::Receive)]
    );
    assert_eq!(q.a.e.retired_unreported(), 2);
}

/// Every way a connection ends reports the held-back count once, before its terminal fact
/// (the successes precede it, as every successful completion does) and before any flush.
#[test]
fn every_end_of_the_connection_reports_the_count_before_its_fact() {
    type End = fn(&mut Pair) -> CmFact;
    let ends: [(&str, End); 7] = [
        ("abrupt disconnect", |p| {
            p.a.e.disconnect();
            CmFact::Disconnected
        }),
        ("graceful disconnect, nothing outstanding", |p| {
            p.a.e.disconnect_graceful(p.now, Duration::from_secs(1));
            CmFact::Disconnected
        }),
        ("the peer's Disconnect", |p| {
            p.b.e.disconnect();
            p.run();
            CmFact::Disconnected
        }),
        ("lost stream", |p| {
            p.a.e.handle_transport_error(TransportError::Lost);
            CmFact::Broken
        }),
        ("malformed frame", |p| {
            p.a.e.handle_input(p.now, &[0xffu8; 12]);
            CmFact::Broken
        }),
        ("receiver not ready at A", |p| {
            // B's send finds no receive at A and waits there past its RNR timeout.
            let src = p.b.register(b"z");
            p.b.e.post(p.b.wr(PostOp::Send, &[tri(src, 0, 1)], 50));
            p.run();
            p.advance(RNR + Duration::from_millis(1));
            CmFact::Broken
        }),
        ("reset", |p| {
            p.a.e.reset();
            // No fact of its own: the count alone (checked below).
            CmFact::Disconnected
        }),
    ];
    for (name, end) in ends {
        let mut p = quiet_sends(3);
        // A receive outstanding at A (not where B's send must find none): its flush comes
        // after the fact.
        let rnr = name.starts_with("receiver not ready");
        if !rnr {
            let r = p.a.register(&[0u8; 4]);
            p.a.e.post(p.a.wr(PostOp::Recv, &[tri(r, 0, 4)], 8));
        }
        let fact = end(&mut p);
        let evs = drain(&mut p.a);
        let mut want = vec![Event::Retired(3)];
        if name != "reset" {
            want.push(Event::Cm(fact));
            if !rnr {
                want.push(done(8, DtoStatus::Flushed, 0, DtoOp::Receive));
            }
        }
        assert_eq!(evs, want, "{name}");
        assert_eq!(p.a.e.retired_unreported(), 0, "{name}");
        // Nothing is reported twice, whatever comes after.
        p.a.e.disconnect();
        p.run();
        assert!(
            !drain(&mut p.a)
                .iter()
                .any(|e| matches!(e, Event::Retired(_))),
            "{name}"
        );
    }
}

/// A request the target refuses: the suppressed requests before it succeeded (the target
/// executed them in order), so their count comes before the error.
#[test]
fn a_refused_request_reports_the_count_before_its_error() {
    let mut p = quiet_sends(2);
    let local = p.a.register(&[1u8; 8]);
    let good = p.b.register(&[0u8; 8]);
    let target = p.b.register(&[7u8; 8]);
    let bad = (target.0, target.1 ^ 0x5a5a_5a5a, target.2);
    let mut wr =
        p.a.wr(PostOp::RdmaWrite(rtri(good, 0, 8)), &[tri(local, 0, 8)], 1);
    wr.flags = CompletionFlags::SUPPRESS;
    // Not acknowledged before the refused one: counted from the Nak's acknowledgement.
    p.a.e.post(wr);
    p.a.e
        .post(p.a.wr(PostOp::RdmaWrite(rtri(bad, 0, 8)), &[tri(local, 0, 8)], 2));
    p.run();
    assert_eq!(
        p.a.take(),
        vec![
            Event::Retired(3),
            done(2, DtoStatus::RemoteAccess, 0, DtoOp::RdmaWrite),
            Event::Cm(CmFact::Broken),
        ]
    );
    assert_eq!(p.a.e.retired_unreported(), 0);
    assert_eq!(p.b.read(good.0), vec![1u8; 8]);
    assert_eq!(p.b.read(target.0), vec![7u8; 8]);
}
