//! Connection management corner cases through the facade.

mod common;

use common::*;
use dat::types::{
    CloseFlags, CompletionFlags, ConnQual, Cookie, DtoStatus, EventNumber, PspFlags, Qos, Timeout,
};

fn none() -> CompletionFlags {
    CompletionFlags::empty()
}

#[test]
fn accept_after_the_requester_gave_up_is_an_accept_completion_error() {
    let dir = scratch("late");
    let reg = registry(&dir, "");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let (_sp, cr_evd) = listen(&b.ia, 4600);
    a.connect(4600, b"", Timeout(20_000));
    let (cr, _) = request(&b.ia, &cr_evd);
    assert_eq!(cm(&a.conn).0, EventNumber::TimedOut);
    cr.accept(Some(&b.ep), b"too late").unwrap();
    assert_eq!(cm(&b.conn).0, EventNumber::AcceptCompletionError);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn passive_side_disconnect_free_and_ia_close_reach_the_peer() {
    let dir = scratch("teardown");
    let reg = registry(&dir, "");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let sp = connect_pair(&a, &b, 4700);
    a.ep.post_recv(&[a.lmr.triplet(0, 64)], Cookie(1), none())
        .unwrap();
    b.ep.disconnect(CloseFlags::Abrupt).unwrap();
    assert_eq!(cm(&b.conn).0, EventNumber::Disconnected);
    assert_eq!(cm(&a.conn).0, EventNumber::Disconnected);
    let f = dto(&a.dto);
    assert_eq!((f.cookie, f.status), (Cookie(1), DtoStatus::Flushed));

    // Reuse both EPs: reset and connect again; then free the passive EP while connected.
    a.ep.reset().unwrap();
    b.ep.reset().unwrap();
    sp.free().unwrap();
    let _sp = connect_pair(&a, &b, 4701);
    b.ep.free().unwrap();
    assert_eq!(cm(&a.conn).0, EventNumber::Disconnected);

    // A third connection, torn down by closing the passive IA.
    a.ep.reset().unwrap();
    let c = Side::new(&reg);
    let _sp = connect_pair(&a, &c, 4702);
    c.ia.close(CloseFlags::Abrupt).unwrap();
    assert_eq!(cm(&a.conn).0, EventNumber::Disconnected);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn provider_created_endpoint_and_dup_connect() {
    let dir = scratch("psp");
    let reg = registry(&dir, "");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let cr_evd = b.ia.create_evd(8, dat::types::EvdFlags::CR, None).unwrap();
    let _sp =
        b.ia.create_psp(ConnQual(4800), &cr_evd, PspFlags::Provider)
            .unwrap();
    a.connect(4800, b"first", WAIT);
    let (cr, pd) = request(&b.ia, &cr_evd);
    assert_eq!(pd, b"first");
    let ep = cr.ep().expect("the provider created an EP");
    cr.reject(b"use another").unwrap();
    assert_eq!(
        cm(&a.conn),
        (EventNumber::PeerRejected, b"use another".to_vec())
    );
    drop(ep);

    // dup_connect reaches the same qualifier as a connected EP.
    a.ep.reset().unwrap();
    let (_sp2, cr2) = listen(&b.ia, 4801);
    a.connect(4801, b"", WAIT);
    let (cr, _) = request(&b.ia, &cr2);
    cr.accept(Some(&b.ep), b"").unwrap();
    assert_eq!(cm(&a.conn).0, EventNumber::Established);
    assert_eq!(cm(&b.conn).0, EventNumber::Established);
    let d = Side::new(&reg);
    d.ep.dup_connect(&a.ep, WAIT, b"dup", Qos::BestEffort)
        .unwrap();
    let (cr, pd) = request(&b.ia, &cr2);
    assert_eq!(pd, b"dup");
    // The acceptor's second EP lives on the same IA as the request.
    let conn2 =
        b.ia.create_evd(8, dat::types::EvdFlags::CONNECTION, None)
            .unwrap();
    let ep2 =
        b.ia.create_ep(&dat::EpParams {
            pz: Some(&b.pz),
            recv_evd: Some(&b.dto),
            request_evd: Some(&b.dto),
            connect_evd: Some(&conn2),
            ..dat::EpParams::default()
        })
        .unwrap();
    cr.accept(Some(&ep2), b"").unwrap();
    assert_eq!(cm(&d.conn).0, EventNumber::Established);
    assert_eq!(cm(&conn2).0, EventNumber::Established);
    for s in [&a, &b, &d] {
        s.ia.close(CloseFlags::Abrupt).unwrap();
    }
    assert!(entries(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stale_entries_of_a_crashed_listener_are_removed_at_open() {
    use std::os::unix::net::UnixListener;
    let dir = scratch("stale");
    std::fs::create_dir_all(&dir).unwrap();
    // A listener that "crashed": its socket file stays, nobody listens any more.
    drop(UnixListener::bind(dir.join("4242")).unwrap());
    std::fs::write(dir.join("not-ours"), b"").unwrap();
    assert_eq!(
        entries(&dir),
        vec!["4242".to_owned(), "not-ours".to_owned()]
    );
    let reg = registry(&dir, "");
    let a = Side::new(&reg);
    assert_eq!(
        entries(&dir),
        vec!["not-ours".to_owned()],
        "only our dead entry goes"
    );
    // Its qualifier is free again.
    let (_sp, _evd) = listen(&a.ia, 4242);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    assert_eq!(entries(&dir), vec!["not-ours".to_owned()]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_parameters_name_the_key() {
    let dir = scratch("params");
    for (extra, key) in [
        (", ring_slots = 3", "ring_slots"),
        (", slot_size = 100", "slot_size"),
        (", rdma = \"fast\"", "rdma"),
        (", connect_retry_ms = -1", "connect_retry_ms"),
        (", connect_retry_ms = 600001", "connect_retry_ms"),
        (", colour = 1", "colour"),
    ] {
        let reg = registry(&dir, extra);
        let e = reg.open_ia(Some("shm0"), 16).unwrap_err();
        assert_eq!(e.code().kind(), dat::ErrorType::InvalidParameter, "{extra}");
        assert!(e.message().contains(key), "{}", e.message());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn graceful_disconnect_completes_requests_in_flight_first() {
    let dir = scratch("graceful");
    let reg = registry(&dir, "");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let _sp = connect_pair(&a, &b, 4810);
    for i in 0..4u64 {
        b.ep.post_recv(&[b.lmr.triplet(i * 4096, 4096)], Cookie(i), none())
            .unwrap();
    }
    let rmr = b.lmr.rmr_triplet(1 << 19, 1 << 16);
    a.ep.post_recv(&[a.lmr.triplet(0, 64)], Cookie(99), none())
        .unwrap();
    for i in 0..4u64 {
        a.ep.post_send(&[a.lmr.triplet(i * 4096, 4096)], Cookie(i), none())
            .unwrap();
        a.ep.post_rdma_write(&[a.lmr.triplet(0, 1 << 16)], Cookie(10 + i), rmr, none())
            .unwrap();
    }
    a.ep.disconnect(CloseFlags::Graceful).unwrap();
    // Every request completed successfully, in posting order, before DISCONNECTED.
    for i in 0..4u64 {
        for cookie in [i, 10 + i] {
            let c = dto(&a.dto);
            assert_eq!((c.cookie, c.status), (Cookie(cookie), DtoStatus::Success));
        }
    }
    assert_eq!(cm(&a.conn).0, EventNumber::Disconnected);
    // The receive still posted is flushed after.
    let f = dto(&a.dto);
    assert_eq!((f.cookie, f.status), (Cookie(99), DtoStatus::Flushed));
    for i in 0..4u64 {
        let c = dto(&b.dto);
        assert_eq!((c.cookie, c.status), (Cookie(i), DtoStatus::Success));
    }
    assert_eq!(cm(&b.conn).0, EventNumber::Disconnected);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn graceful_disconnect_of_a_send_nobody_receives_ends_flushed() {
    let dir = scratch("graceful-stuck");
    let reg = registry(&dir, "");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let _sp = connect_pair(&a, &b, 4811);
    // B posts no receive: the send is held back at B and never completes.
    a.ep.post_send(&[a.lmr.triplet(0, 64)], Cookie(7), none())
        .unwrap();
    a.ep.disconnect(CloseFlags::Graceful).unwrap();
    // The wait is bounded: DISCONNECTED arrives (within `WAIT`), then the send is flushed.
    assert_eq!(cm(&a.conn).0, EventNumber::Disconnected);
    let f = dto(&a.dto);
    assert_eq!((f.cookie, f.status), (Cookie(7), DtoStatus::Flushed));
    assert_eq!(cm(&b.conn).0, EventNumber::Disconnected);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn abrupt_disconnect_cuts_a_graceful_wait_short() {
    let dir = scratch("graceful-abrupt");
    let reg = registry(&dir, "");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let _sp = connect_pair(&a, &b, 4812);
    a.ep.post_send(&[a.lmr.triplet(0, 64)], Cookie(7), none())
        .unwrap();
    a.ep.disconnect(CloseFlags::Graceful).unwrap();
    a.ep.disconnect(CloseFlags::Abrupt).unwrap();
    // DISCONNECTED at once (the core posts it), the send flushed; the peer sees the close.
    assert_eq!(a.ep.state(), Ok(dat::EpState::Disconnected));
    assert_eq!(cm(&a.conn).0, EventNumber::Disconnected);
    let f = dto(&a.dto);
    assert_eq!((f.cookie, f.status), (Cookie(7), DtoStatus::Flushed));
    assert_eq!(cm(&b.conn).0, EventNumber::Disconnected);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn closing_right_after_a_wake_up_never_hangs() {
    // A connect to nobody wakes the provider thread; closing at once races its pass. Each
    // close must return (bounded: the loop runs on a helper thread).
    let dir = scratch("close-race");
    let (tx, rx) = std::sync::mpsc::channel();
    let d2 = dir.clone();
    std::thread::spawn(move || {
        let reg = registry(&d2, "");
        for i in 0..1000u32 {
            let a = Side::new(&reg);
            a.connect(4813, b"", WAIT);
            let t = std::time::Instant::now();
            while t.elapsed() < std::time::Duration::from_nanos(u64::from(i % 64) * 400) {
                std::hint::spin_loop();
            }
            a.ia.close(CloseFlags::Abrupt).unwrap();
        }
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(std::time::Duration::from_secs(30)).is_ok(),
        "an IA close hung"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn waiters_of_two_evds_on_one_ia_are_both_woken() {
    // Two threads sleep (past the facade's spin) on the receive EVDs of two endpoints of one
    // IA; sends to both must wake both. A waiter left asleep would sit out its 10-minute
    // timeout: the helper threads are joined within a bound instead.
    let dir = scratch("two-waiters");
    let reg = registry(&dir, "");
    let (a1, b) = (Side::new(&reg), Side::new(&reg));
    let _sp = connect_pair(&a1, &b, 4814);
    let a2 = {
        let dto = a1
            .ia
            .create_evd(256, dat::types::EvdFlags::DTO, None)
            .unwrap();
        let conn = a1
            .ia
            .create_evd(16, dat::types::EvdFlags::CONNECTION, None)
            .unwrap();
        let ep = a1
            .ia
            .create_ep(&dat::EpParams {
                pz: Some(&a1.pz),
                recv_evd: Some(&dto),
                request_evd: Some(&dto),
                connect_evd: Some(&conn),
                ..dat::EpParams::default()
            })
            .unwrap();
        (dto, conn, ep)
    };
    let b2 = b.ia.create_ep(&dat::EpParams {
        pz: Some(&b.pz),
        recv_evd: Some(&b.dto),
        request_evd: Some(&b.dto),
        connect_evd: Some(&b.conn),
        ..dat::EpParams::default()
    });
    let b2 = b2.unwrap();
    let (sp2, cr_evd) = listen(&b.ia, 4815);
    a2.2.connect(
        addr(),
        ConnQual(4815),
        WAIT,
        b"",
        Qos::BestEffort,
        dat::ConnectFlags::Default,
    )
    .unwrap();
    let (cr, _) = request(&b.ia, &cr_evd);
    cr.accept(Some(&b2), b"").unwrap();
    assert_eq!(cm(&a2.1).0, EventNumber::Established);
    assert_eq!(cm(&b.conn).0, EventNumber::Established);
    let long = Timeout(600_000_000);
    for round in 0..20u64 {
        a1.ep
            .post_recv(&[a1.lmr.triplet(0, 64)], Cookie(round), none())
            .unwrap();
        a2.2.post_recv(&[a1.lmr.triplet(64, 64)], Cookie(round), none())
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        for evd in [a1.dto.clone(), a2.0.clone()] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = tx.send(evd.wait(long, 1).map(|(e, _)| e.number));
            });
        }
        // Let both waiters go to sleep (a guess that only affects what is exercised).
        std::thread::sleep(std::time::Duration::from_millis(5));
        b.ep.post_send(&[b.lmr.triplet(0, 8)], Cookie(round), none())
            .unwrap();
        b2.post_send(&[b.lmr.triplet(8, 8)], Cookie(round), none())
            .unwrap();
        for _ in 0..2 {
            let got = rx.recv_timeout(std::time::Duration::from_secs(30));
            assert_eq!(
                got,
                Ok(Ok(EventNumber::DtoCompletion)),
                "round {round}: a waiter was not woken"
            );
        }
        for _ in 0..2 {
            assert_eq!(dto(&b.dto).status, DtoStatus::Success);
        }
    }
    drop(sp2);
    a1.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
