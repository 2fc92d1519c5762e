//! The in-provider wait (`Transport::block`): a waiter asleep on the rings' eventfds and the
//! provider thread share each ring's wake-up, one token per arming. These tests drive the
//! interleaving that lost it (one thread waits on one IA, draining the wake-up the other
//! side's provider thread had armed for, then on the other IA, which that provider thread
//! alone can serve) many times over.

mod common;

use common::*;
use dat::types::{CloseFlags, CompletionFlags, Cookie, DtoOp, DtoStatus};

fn none() -> CompletionFlags {
    CompletionFlags::empty()
}

fn expect(evd: &dat::Evd, cookie: u64, op: DtoOp) {
    let c = dto(evd);
    assert_eq!(
        (c.cookie, c.status, c.operation),
        (Cookie(cookie), DtoStatus::Success, op),
        "{c:?}"
    );
}

/// Ping-pong on one thread between two IAs of one process, each side waiting in turn: every
/// message in one direction is taken by the receiver's provider thread while this thread
/// sleeps on the sender's IA. Before the fix one round in a few hundred slept through its
/// wake-up until the ten-second bound.
#[test]
fn a_waiter_that_drains_a_wake_up_rearms_it_for_the_provider_thread() {
    let dir = scratch("wait");
    let reg = registry(&dir, ", wait_in_provider = true");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let _sp = connect_pair(&a, &b, 4900);
    for i in 0..300u64 {
        let c = 10 * i;
        b.ep.post_recv(&[b.lmr.triplet(0, 64)], Cookie(c), none())
            .unwrap();
        a.ep.post_send(&[a.lmr.triplet(0, 8)], Cookie(c + 1), none())
            .unwrap();
        expect(&a.dto, c + 1, DtoOp::Send);
        expect(&b.dto, c, DtoOp::Receive);
        a.ep.post_recv(&[a.lmr.triplet(64, 64)], Cookie(c + 2), none())
            .unwrap();
        b.ep.post_send(&[b.lmr.triplet(64, 8)], Cookie(c + 3), none())
            .unwrap();
        expect(&b.dto, c + 3, DtoOp::Send);
        expect(&a.dto, c + 2, DtoOp::Receive);
    }
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
