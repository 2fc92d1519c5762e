//! Teardown: a peer process killed mid-transfer, disconnect storms, free in every state,
//! closing an IA with children.

use dat::types::{CloseFlags, CompletionFlags, Cookie, DtoStatus, EventNumber};
use dat::{DatError, EpState, Subtype};

use crate::Outcome;
use crate::harness::{connect_more, expect_conn, next_event, pair, sides};
use crate::target::Target;

/// A peer process killed in the middle of a transfer: this side sees BROKEN or DISCONNECTED
/// in bounded time, outstanding requests complete (flushed or failed), nothing hangs.
pub fn peer_killed_mid_transfer(t: &dyn Target) -> Outcome {
    if !t.multi_process() {
        return Outcome::Skip("target is single-process (needs a real second process)".into());
    }
    crate::peer::killed_mid_transfer(t)
}

/// A peer process that closes its IA and exits: this side sees DISCONNECTED.
pub fn peer_process_exits(t: &dyn Target) -> Outcome {
    if !t.multi_process() {
        return Outcome::Skip("target is single-process (needs a real second process)".into());
    }
    crate::peer::exits_after_connect(t)
}

/// Many connections to one IA, all disconnected at once from the active side: every passive
/// EP gets exactly one DISCONNECTED.
pub fn disconnect_storm_many_to_one(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    let n = 16;
    let eps: Vec<_> = (0..n).map(|_| connect_more(&a, &b, &psp)).collect();
    for (ea, _) in &eps {
        ea.disconnect(CloseFlags::Abrupt).unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..n {
        let ev = next_event(&b.conn);
        assert_eq!(ev.number, EventNumber::Disconnected, "{ev:?}");
        let id = ev.ep().expect("names an EP");
        assert!(seen.insert(id), "two DISCONNECTED for {id:?}");
    }
    for (ea, eb) in &eps {
        assert!(seen.contains(&eb.id()));
        assert_eq!(eb.state(), Ok(EpState::Disconnected));
        assert_eq!(ea.state(), Ok(EpState::Disconnected));
    }
    crate::harness::assert_empty(&b.conn);
    Outcome::Pass
}

/// The same storm from the passive side, with receives posted everywhere: each flushed.
pub fn disconnect_storm_passive_side(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    let n = 12u64;
    let eps: Vec<_> = (0..n).map(|_| connect_more(&a, &b, &psp)).collect();
    for (i, (ea, _)) in eps.iter().enumerate() {
        crate::harness::post_recv(&a, ea, i as u64 * 64, 64, i as u64);
    }
    for (_, eb) in &eps {
        eb.disconnect(CloseFlags::Graceful).unwrap();
    }
    let mut disc = std::collections::HashSet::new();
    for _ in 0..n {
        let ev = next_event(&a.conn);
        assert_eq!(ev.number, EventNumber::Disconnected, "{ev:?}");
        assert!(disc.insert(ev.ep().expect("names an EP")), "{ev:?}");
    }
    let mut flushed = std::collections::HashSet::new();
    for _ in 0..n {
        let c = crate::harness::expect_dto(&a.recv);
        assert_eq!(c.status, DtoStatus::Flushed, "{c:?}");
        assert!(flushed.insert(c.cookie.0), "{c:?}");
    }
    assert_eq!(flushed, (0..n).collect());
    assert_eq!(flushed.len() as u64, n);
    Outcome::Pass
}

/// Freeing a connected EP disconnects the peer and releases the EVDs and PZ it used.
pub fn free_connected_releases(t: &dyn Target) -> Outcome {
    let p = pair(t);
    crate::harness::post_recv(&p.b, &p.b.ep, 0, 64, 9);
    p.a.ep.free().unwrap();
    expect_conn(&p.b.conn, EventNumber::Disconnected, &p.b.ep);
    let c = crate::harness::expect_dto(&p.b.recv);
    assert_eq!((c.cookie, c.status), (Cookie(9), DtoStatus::Flushed));
    p.a.lmr.free().unwrap();
    p.a.pz.free().expect("PZ released by the freed EP");
    for e in [&p.a.req, &p.a.recv, &p.a.conn] {
        e.free().expect("EVD released by the freed EP");
    }
    Outcome::Pass
}

/// Freeing an EP with requests outstanding returns at once; the peer ends DISCONNECTED.
pub fn free_with_outstanding_requests(t: &dyn Target) -> Outcome {
    let p = crate::harness::deep_pair(t, 64);
    for i in 0..32u64 {
        p.a.ep
            .post_send(
                &[p.a.lmr.triplet(0, 1024)],
                Cookie(i),
                CompletionFlags::DEFAULT,
            )
            .unwrap();
    }
    p.a.ep.free().unwrap();
    crate::harness::wait_state(&p.b.ia, &p.b.ep, EpState::Disconnected);
    assert_eq!(
        p.a.ep.post_send(&[], Cookie(0), CompletionFlags::DEFAULT),
        Err(DatError::invalid_handle(Subtype::InvalidHandleEp))
    );
    Outcome::Pass
}

/// Teardown of everything in dependency order succeeds, then a graceful close.
pub fn orderly_teardown(t: &dyn Target) -> Outcome {
    let p = pair(t);
    crate::harness::disconnect_pair(&p);
    let crate::harness::Pair { a, b, psp, .. } = p;
    psp.free().unwrap();
    for s in [a, b] {
        s.ep.free().unwrap();
        s.lmr.free().unwrap();
        s.pz.free().unwrap();
        for e in [&s.req, &s.recv, &s.conn, &s.cr] {
            e.free().unwrap();
        }
        s.ia.close(CloseFlags::Graceful).unwrap();
    }
    Outcome::Pass
}

/// Both IAs closed abruptly mid-connection, in either order: no hang, no panic.
pub fn close_both_abruptly(t: &dyn Target) -> Outcome {
    let p = pair(t);
    crate::harness::post_recv(&p.b, &p.b.ep, 0, 64, 1);
    crate::harness::post_send(&p.a, &p.a.ep, 0, 64, 2);
    p.b.ia.close(CloseFlags::Abrupt).unwrap();
    p.a.ia.close(CloseFlags::Abrupt).unwrap();
    assert_eq!(
        p.a.ep.state(),
        Err(DatError::invalid_handle(Subtype::InvalidHandleEp))
    );
    Outcome::Pass
}

/// An EP freed while its connect is pending: the passive side's later accept cannot
/// establish; it ends DISCONNECTED with `ACCEPT_COMPLETION_ERROR` (or `DISCONNECTED`).
pub fn free_pending_connect_then_accept(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    crate::harness::connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"");
    let cr = crate::harness::expect_cr(&b.ia, &b.cr, &psp);
    a.ep.free().unwrap();
    match cr.accept(Some(&b.ep), b"") {
        Ok(()) => {
            let ev = next_event(&b.conn);
            assert_eq!(ev.ep(), Some(b.ep.id()), "{ev:?}");
            assert!(
                matches!(
                    ev.number,
                    EventNumber::AcceptCompletionError | EventNumber::Disconnected
                ),
                "{ev:?}"
            );
            crate::harness::wait_state(&b.ia, &b.ep, EpState::Disconnected);
        }
        Err(e) => assert_eq!(b.ep.state(), Ok(EpState::Unconnected), "{e}"),
    }
    Outcome::Pass
}

/// An IA closed abruptly while its EP's connect is pending and the peer's request is
/// unanswered: no hang; the peer's accept then fails or ends DISCONNECTED.
pub fn close_ia_with_pending_connect(t: &dyn Target) -> Outcome {
    let (a, b) = sides(t);
    let psp = b.psp(t);
    crate::harness::connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"");
    let cr = crate::harness::expect_cr(&b.ia, &b.cr, &psp);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    if cr.accept(Some(&b.ep), b"").is_ok() {
        crate::harness::wait_state(&b.ia, &b.ep, EpState::Disconnected);
    } else {
        assert_eq!(b.ep.state(), Ok(EpState::Unconnected));
    }
    Outcome::Pass
}
