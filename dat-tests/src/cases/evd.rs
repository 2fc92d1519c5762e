//! Event dispatchers and CNOs: dequeue on empty, wait timeouts, thresholds, overflow,
//! unwaitable, software events, CNO triggering.

use std::time::{Duration, Instant};

use dat::types::{CloseFlags, EvdFlags, EventNumber, Timeout};
use dat::{AsyncHandle, DatError, EpState, Evd, Event, EventData, Subtype};

use crate::Outcome;
use crate::harness::{assert_empty, next_event, pair, wait_state};
use crate::target::Target;

fn sw(t: &dyn Target, qlen: i32) -> (dat::Ia, Evd) {
    let ia = t.open_pair().0;
    let e = ia.create_evd(qlen, EvdFlags::SOFTWARE, None).unwrap();
    (ia, e)
}

fn pointer(ev: &Event) -> u64 {
    assert_eq!(ev.number, EventNumber::Software, "{ev:?}");
    match ev.data {
        EventData::Software { pointer } => pointer,
        ref other => panic!("{other:?}"),
    }
}

/// Dequeue on an empty EVD is exactly `0x000D0000` (`DAT_QUEUE_EMPTY`, no class bit).
pub fn dequeue_empty_exact(t: &dyn Target) -> Outcome {
    let (_ia, e) = sw(t, 4);
    let err = e.dequeue().unwrap_err();
    assert_eq!(err.to_raw(), 0x000D_0000);
    assert_eq!(err, DatError::QUEUE_EMPTY);
    Outcome::Pass
}

/// A wait times out with `DAT_TIMEOUT_EXPIRED`, and never before the timeout.
pub fn wait_timeout_expired(t: &dyn Target) -> Outcome {
    let (_ia, e) = sw(t, 4);
    let start = Instant::now();
    let err = e.wait(Timeout(50_000), 1).unwrap_err();
    let took = start.elapsed();
    assert_eq!(err, DatError::TIMEOUT_EXPIRED);
    assert_eq!(err.kind(), dat::ErrorType::TimeoutExpired);
    assert!(
        took >= Duration::from_millis(50),
        "returned early after {took:?}"
    );
    assert_eq!(
        e.wait(Timeout::ZERO, 1).unwrap_err(),
        DatError::TIMEOUT_EXPIRED
    );
    Outcome::Pass
}

/// Software events carry their pointer, in FIFO order, and `nmore` counts the rest.
pub fn software_events_fifo(t: &dyn Target) -> Outcome {
    let (_ia, e) = sw(t, 8);
    for p in [11u64, u64::MAX, 0] {
        e.post_se(p).unwrap();
    }
    let (ev, nmore) = e.wait(crate::harness::WAIT, 1).unwrap();
    assert_eq!((pointer(&ev), nmore), (11, 2));
    assert_eq!(pointer(&e.dequeue().unwrap()), u64::MAX);
    let (ev, nmore) = e.wait(crate::harness::WAIT, 1).unwrap();
    assert_eq!((pointer(&ev), nmore), (0, 0));
    assert_empty(&e);
    Outcome::Pass
}

/// `dat_evd_post_se` needs the software flag (`INVALID_ARG1`); a full queue is
/// `DAT_QUEUE_FULL` and keeps what was queued.
pub fn post_se_codes(t: &dyn Target) -> Outcome {
    let ia = t.open_pair().0;
    let dto = ia.create_evd(4, EvdFlags::DTO, None).unwrap();
    assert_eq!(dto.post_se(1), Err(DatError::invalid_arg(1)));
    let e = ia.create_evd(2, EvdFlags::SOFTWARE, None).unwrap();
    e.post_se(1).unwrap();
    e.post_se(2).unwrap();
    assert_eq!(e.post_se(3).unwrap_err().kind(), dat::ErrorType::QueueFull);
    assert_eq!(pointer(&e.dequeue().unwrap()), 1);
    assert_eq!(pointer(&e.dequeue().unwrap()), 2);
    assert_empty(&e);
    Outcome::Pass
}

/// A wait with threshold N returns only once N events are queued.
pub fn wait_threshold(t: &dyn Target) -> Outcome {
    let (_ia, e) = sw(t, 8);
    e.post_se(1).unwrap();
    e.post_se(2).unwrap();
    assert_eq!(
        e.wait(Timeout(20_000), 3).unwrap_err(),
        DatError::TIMEOUT_EXPIRED
    );
    assert_eq!(e.len(), 2, "a timed-out wait takes nothing");
    e.post_se(3).unwrap();
    let (ev, nmore) = e.wait(crate::harness::WAIT, 3).unwrap();
    assert_eq!((pointer(&ev), nmore), (1, 2));
    Outcome::Pass
}

/// Threshold below 1 or above the queue length is `INVALID_ARG3`.
pub fn wait_threshold_codes(t: &dyn Target) -> Outcome {
    let (_ia, e) = sw(t, 4);
    for th in [0, -1, 5] {
        assert_eq!(
            e.wait(Timeout::ZERO, th).unwrap_err(),
            DatError::invalid_arg(3),
            "{th}"
        );
    }
    Outcome::Pass
}

/// A blocked waiter is woken by an event from another thread.
pub fn wait_woken_by_other_thread(t: &dyn Target) -> Outcome {
    let (_ia, e) = sw(t, 4);
    // A poll that finds the EVD empty first: the registered waiter must still be reported
    // by the next poll (the facade skips the lock of an EVD it knows to be empty).
    assert_eq!(e.dequeue().unwrap_err(), DatError::QUEUE_EMPTY);
    let e2 = e.clone();
    let h = std::thread::spawn(move || e2.wait(crate::harness::WAIT, 1));
    // Wait until the waiter is registered (resize refuses while one is).
    let deadline = Instant::now() + Duration::from_secs(10);
    while e.resize(4) != Err(DatError::invalid_state(Subtype::StateEvdWaiter)) {
        assert!(Instant::now() < deadline, "waiter never registered");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        e.wait(Timeout::ZERO, 1).unwrap_err(),
        DatError::invalid_state(Subtype::StateEvdWaiter),
        "a second waiter is refused"
    );
    assert_eq!(
        e.dequeue().unwrap_err(),
        DatError::invalid_state(Subtype::StateEvdWaiter),
        "dequeue while a waiter is blocked"
    );
    e.post_se(42).unwrap();
    let (ev, nmore) = h.join().expect("waiter thread").expect("woken");
    assert_eq!((pointer(&ev), nmore), (42, 0));
    Outcome::Pass
}

/// The calling thread's voluntary context switches so far (its sleeps).
fn voluntary_switches() -> u64 {
    crate::harness::voluntary_switches(std::path::Path::new("/proc/thread-self/status"))
        .expect("voluntary_ctxt_switches of /proc/thread-self/status")
}

/// An idle wait sleeps until its timeout: its thread does not wake up on a timer meanwhile
/// (the verbs provider's waiter woke every 20 ms to catch an unblock it might have missed),
/// on a software EVD and on a connected endpoint's completion EVD alike.
pub fn idle_wait_sleeps(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let sw = p.a.ia.create_evd(4, EvdFlags::SOFTWARE, None).unwrap();
    for (name, e) in [("software", &sw), ("request completions", &p.a.req)] {
        let before = voluntary_switches();
        let start = Instant::now();
        assert_eq!(
            e.wait(Timeout(500_000), 1).unwrap_err(),
            DatError::TIMEOUT_EXPIRED,
            "{name}"
        );
        let took = start.elapsed();
        let woke = voluntary_switches() - before;
        assert!(
            took >= Duration::from_millis(500),
            "{name}: returned after {took:?}"
        );
        assert!(
            woke <= 10,
            "{name}: the waiting thread slept {woke} times in {took:?} (at most 10)"
        );
    }
    Outcome::Pass
}

/// Two threads hand a token back and forth through two software EVDs, each blocking in
/// `dat_evd_wait` until the other posts: every post reaches its waiter however close it
/// comes to the waiter's going to sleep (a lost wake-up shows as a wait running to its
/// timeout).
pub fn wait_ping_pong_loses_no_wakeup(t: &dyn Target) -> Outcome {
    const ROUNDS: u64 = 300;
    let ia = t.open_pair().0;
    let ping = ia.create_evd(4, EvdFlags::SOFTWARE, None).unwrap();
    let pong = ia.create_evd(4, EvdFlags::SOFTWARE, None).unwrap();
    let (ping2, pong2) = (ping.clone(), pong.clone());
    let echo = std::thread::spawn(move || -> Result<(), String> {
        for i in 0..ROUNDS {
            let (ev, _) = ping2
                .wait(Timeout(10_000_000), 1)
                .map_err(|e| format!("echo, round {i}: {e:?}"))?;
            pong2
                .post_se(pointer(&ev))
                .map_err(|e| format!("echo post, round {i}: {e:?}"))?;
        }
        Ok(())
    });
    for i in 0..ROUNDS {
        ping.post_se(i).unwrap();
        match pong.wait(Timeout(10_000_000), 1) {
            Ok((ev, _)) => assert_eq!(pointer(&ev), i),
            Err(e) => panic!("round {i}: {e:?} (a lost wake-up)"),
        }
    }
    echo.join().expect("echo thread").unwrap();
    Outcome::Pass
}

/// Unwaitable: waits refused with `EVD_UNWAITABLE`, a blocked waiter released with
/// `DAT_INVALID_STATE`; dequeue still works; clear restores waiting.
pub fn unwaitable(t: &dyn Target) -> Outcome {
    let (_ia, e) = sw(t, 4);
    let e2 = e.clone();
    let h = std::thread::spawn(move || e2.wait(crate::harness::WAIT, 1));
    let deadline = Instant::now() + Duration::from_secs(10);
    while e.resize(4) != Err(DatError::invalid_state(Subtype::StateEvdWaiter)) {
        assert!(Instant::now() < deadline, "waiter never registered");
        std::thread::sleep(Duration::from_millis(1));
    }
    e.set_unwaitable().unwrap();
    let r = h.join().expect("waiter thread");
    assert_eq!(r.unwrap_err().kind(), dat::ErrorType::InvalidState);
    assert_eq!(
        e.wait(Timeout::ZERO, 1).unwrap_err(),
        DatError::invalid_state(Subtype::StateEvdUnwaitable)
    );
    e.post_se(5).unwrap();
    assert_eq!(pointer(&e.dequeue().unwrap()), 5);
    e.clear_unwaitable().unwrap();
    e.post_se(6).unwrap();
    assert_eq!(pointer(&e.wait(crate::harness::WAIT, 1).unwrap().0), 6);
    Outcome::Pass
}

/// Resize keeps events, refuses to shrink below them, and checks its argument.
pub fn resize(t: &dyn Target) -> Outcome {
    let (_ia, e) = sw(t, 4);
    e.post_se(1).unwrap();
    e.post_se(2).unwrap();
    e.post_se(3).unwrap();
    assert_eq!(
        e.resize(2).unwrap_err().kind(),
        dat::ErrorType::InvalidState
    );
    assert_eq!(e.resize(0), Err(DatError::invalid_arg(2)));
    e.resize(16).unwrap();
    assert_eq!(e.query().unwrap().qlen, 16);
    for p in [1, 2, 3] {
        assert_eq!(pointer(&e.dequeue().unwrap()), p);
    }
    Outcome::Pass
}

/// An overflowing EVD raises `DAT_ASYNC_ERROR_EVD_OVERFLOW` naming it on the async EVD,
/// and stays usable.
pub fn overflow_async_event(t: &dyn Target) -> Outcome {
    let (ia_a, ia_b) = t.open_pair();
    let a = crate::harness::Side::new(ia_a.clone());
    let b = crate::harness::Side::new(ia_b);
    // An EP whose connection events go to a one-slot EVD.
    let tiny = ia_a.create_evd(1, EvdFlags::CONNECTION, None).unwrap();
    let ep = ia_a
        .create_ep(&dat::EpParams {
            connect_evd: Some(&tiny),
            ..a.ep_params()
        })
        .unwrap();
    let psp = b.psp(t);
    crate::harness::connect_ep(&ep, &b.addr(), psp.conn_qual(), b"");
    crate::harness::expect_cr(&b.ia, &b.cr, &psp)
        .accept(Some(&b.ep), b"")
        .unwrap();
    wait_state(&ia_a, &ep, EpState::Connected);
    assert_eq!(tiny.len(), 1, "ESTABLISHED fills the EVD");
    ep.disconnect(CloseFlags::Abrupt).unwrap();
    let ev = next_event(&ia_a.async_evd());
    assert_eq!(ev.number, EventNumber::AsyncEvdOverflow, "{ev:?}");
    assert!(
        matches!(ev.data, EventData::Async { handle: AsyncHandle::Evd(id), .. } if id == tiny.id()),
        "{ev:?}"
    );
    let kept = tiny.dequeue().unwrap();
    assert_eq!(kept.number, EventNumber::Established);
    assert_empty(&tiny);
    tiny.post_se(1).unwrap_err();
    Outcome::Pass
}

/// A CNO is triggered by an event on an attached, enabled EVD and names it.
pub fn cno_triggered(t: &dyn Target) -> Outcome {
    let ia = t.open_pair().0;
    let cno = ia.create_cno().unwrap();
    let e1 = ia.create_evd(4, EvdFlags::SOFTWARE, Some(&cno)).unwrap();
    let _e2 = ia.create_evd(4, EvdFlags::SOFTWARE, Some(&cno)).unwrap();
    assert_eq!(
        cno.wait(Timeout(10_000)).unwrap_err(),
        DatError::TIMEOUT_EXPIRED
    );
    e1.post_se(9).unwrap();
    assert_eq!(cno.wait(crate::harness::WAIT), Ok(Some(e1.id())));
    assert_eq!(pointer(&e1.dequeue().unwrap()), 9);
    Outcome::Pass
}

/// A disabled EVD queues but does not trigger its CNO; enabled again, it does.
pub fn cno_disabled_evd(t: &dyn Target) -> Outcome {
    let ia = t.open_pair().0;
    let cno = ia.create_cno().unwrap();
    let e = ia.create_evd(4, EvdFlags::SOFTWARE, Some(&cno)).unwrap();
    e.disable().unwrap();
    e.post_se(1).unwrap();
    assert_eq!(
        cno.wait(Timeout(10_000)).unwrap_err(),
        DatError::TIMEOUT_EXPIRED
    );
    assert_eq!(e.len(), 1);
    e.enable().unwrap();
    e.post_se(2).unwrap();
    assert_eq!(cno.wait(crate::harness::WAIT), Ok(Some(e.id())));
    Outcome::Pass
}

/// A detached EVD no longer triggers the CNO.
pub fn cno_detached(t: &dyn Target) -> Outcome {
    let ia = t.open_pair().0;
    let cno = ia.create_cno().unwrap();
    let e = ia.create_evd(4, EvdFlags::SOFTWARE, None).unwrap();
    e.modify_cno(Some(&cno)).unwrap();
    e.modify_cno(None).unwrap();
    e.post_se(1).unwrap();
    assert_eq!(
        cno.wait(Timeout(10_000)).unwrap_err(),
        DatError::TIMEOUT_EXPIRED
    );
    Outcome::Pass
}

/// A DTO completion from the transport triggers the CNO of the receive EVD.
pub fn cno_triggered_by_completion(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let cno = p.b.ia.create_cno().unwrap();
    p.b.recv.modify_cno(Some(&cno)).unwrap();
    send_triggers_cno(&p, &cno);
    Outcome::Pass
}

/// `a` sends to a receive of `b`, whose receive EVD has `cno` attached: the CNO reports that
/// EVD, which then holds the receive's completion.
fn send_triggers_cno(p: &crate::harness::Pair, cno: &dat::Cno) {
    crate::harness::post_recv(&p.b, &p.b.ep, 0, 64, 1);
    crate::harness::post_send(&p.a, &p.a.ep, 0, 8, 2);
    // Drive the initiator until its send completed (the fabric needs progress).
    crate::harness::expect_dto(&p.a.req);
    assert_eq!(cno.wait(crate::harness::WAIT), Ok(Some(p.b.recv.id())));
    assert_eq!(
        crate::harness::expect_dto(&p.b.recv).cookie,
        dat::types::Cookie(1)
    );
}

/// A completion reaches a CNO waiter while another thread of the same IA is blocked in a
/// wait on a different EVD (a transport whose waiter sleeps on its own EVD's queue only must
/// still deliver the other EVDs' completions); the blocked waiter then gets its own.
pub fn cno_triggered_while_other_evd_waits(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let cno = p.b.ia.create_cno().unwrap();
    p.b.recv.modify_cno(Some(&cno)).unwrap();
    let req = p.b.req.clone();
    let waiter = std::thread::spawn(move || req.wait(crate::harness::WAIT, 1));
    // Wait until the waiter is registered (resize refuses while one is).
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.b.req.resize(8) != Err(DatError::invalid_state(Subtype::StateEvdWaiter)) {
        assert!(Instant::now() < deadline, "waiter never registered");
        std::thread::sleep(Duration::from_millis(1));
    }
    send_triggers_cno(&p, &cno);
    // Now the blocked waiter's own completion: b sends back.
    crate::harness::post_recv(&p.a, &p.a.ep, 64, 64, 3);
    crate::harness::post_send(&p.b, &p.b.ep, 64, 8, 4);
    // Taken at `a` first: that drives `a`'s side of the transfer (the in-memory fabric moves
    // data only when polled).
    assert_eq!(
        crate::harness::expect_dto(&p.a.recv).cookie,
        dat::types::Cookie(3)
    );
    let (ev, _) = waiter.join().expect("waiter thread").expect("woken");
    assert_eq!(ev.number, EventNumber::DtoCompletion, "{ev:?}");
    Outcome::Pass
}

/// A CNO waiter is woken soon after another thread of its IA stops polling: a transport that
/// leaves its completion queues to a polling application (and only now and then looks
/// whether it still polls) must keep looking often while a CNO waiter sleeps, since nobody
/// polls for it. Two rounds: `b`'s other thread polls its RDMA writes to completion for
/// 1.5 s while the waiter sleeps, stops, and `a` sends to a receive on the CNO's EVD.
pub fn cno_woken_soon_after_a_poller_stops(t: &dyn Target) -> Outcome {
    use dat::types::{CompletionFlags, Cookie, DtoStatus};
    let p = pair(t);
    let cno = p.b.ia.create_cno().unwrap();
    p.b.recv.modify_cno(Some(&cno)).unwrap();
    let mut worst = Duration::ZERO;
    for round in 0..2u64 {
        crate::harness::post_recv(&p.b, &p.b.ep, 0, 64, 10 + round);
        let c2 = cno.clone();
        let waiter = std::thread::spawn(move || (c2.wait(crate::harness::WAIT), Instant::now()));
        cno_waiter_registered(&cno);
        let (ep, req) = (p.b.ep.clone(), p.b.req.clone());
        let (local, remote) = (p.b.lmr.triplet(1024, 8), p.a.lmr.rmr_triplet(1024, 8));
        let poller = std::thread::spawn(move || {
            let stop = Instant::now() + Duration::from_millis(1500);
            while Instant::now() < stop {
                ep.post_rdma_write(&[local], Cookie(1), remote, CompletionFlags::DEFAULT)
                    .expect("post_rdma_write");
                loop {
                    match req.dequeue() {
                        Ok(ev) => match ev.data {
                            EventData::Dto(c) => {
                                assert_eq!(c.status, DtoStatus::Success, "{c:?}");
                                break;
                            }
                            ref other => panic!("not a DTO completion: {other:?}"),
                        },
                        Err(e) if e == DatError::QUEUE_EMPTY => std::hint::spin_loop(),
                        Err(e) => panic!("dequeue: {e:?}"),
                    }
                }
            }
        });
        poller.join().expect("poller thread");
        let sent = Instant::now();
        crate::harness::post_send(&p.a, &p.a.ep, 0, 8, 20 + round);
        crate::harness::expect_dto(&p.a.req);
        let (r, woke) = waiter.join().expect("CNO waiter");
        assert_eq!(r, Ok(Some(p.b.recv.id())), "round {round}");
        assert_eq!(
            crate::harness::expect_dto(&p.b.recv).cookie,
            Cookie(10 + round)
        );
        worst = worst.max(woke.saturating_duration_since(sent));
    }
    assert!(
        worst < Duration::from_millis(400),
        "the CNO waiter woke {worst:?} after the send (at most 400 ms)"
    );
    Outcome::Pass
}

/// Two receive completions taken by waits: in order, and the first wait's `nmore` counts what
/// is really queued behind it (a wait that finds its completion at once may have found the
/// second in the same poll and queued it).
pub fn wait_nmore_counts_the_queue(t: &dyn Target) -> Outcome {
    let p = pair(t);
    crate::harness::post_recv(&p.b, &p.b.ep, 0, 64, 1);
    crate::harness::post_recv(&p.b, &p.b.ep, 64, 64, 2);
    crate::harness::post_send(&p.a, &p.a.ep, 0, 8, 3);
    crate::harness::post_send(&p.a, &p.a.ep, 8, 8, 4);
    crate::harness::expect_dto(&p.a.req);
    crate::harness::expect_dto(&p.a.req);
    let dto = |ev: &Event| match ev.data {
        EventData::Dto(c) => c.cookie,
        ref other => panic!("not DTO data: {other:?}"),
    };
    let (first, nmore) =
        p.b.recv
            .wait(crate::harness::WAIT, 1)
            .expect("first receive");
    assert_eq!(dto(&first), dat::types::Cookie(1));
    assert!(nmore <= 1, "nmore {nmore} with one receive left");
    // Nothing dequeues meanwhile, so the queue can only have grown since the wait counted it.
    assert!(
        p.b.recv.len() >= nmore as usize,
        "nmore {nmore} counts events not queued"
    );
    let second = if nmore == 1 {
        p.b.recv
            .dequeue()
            .expect("nmore said one more event is queued")
    } else {
        let (ev, n) =
            p.b.recv
                .wait(crate::harness::WAIT, 1)
                .expect("second receive");
        assert_eq!(n, 0);
        ev
    };
    assert_eq!(dto(&second), dat::types::Cookie(2));
    Outcome::Pass
}

/// Freed EVD: every call is `DAT_INVALID_HANDLE`.
pub fn freed_evd_handle(t: &dyn Target) -> Outcome {
    let (_ia, e) = sw(t, 4);
    e.free().unwrap();
    for r in [
        e.wait(Timeout::ZERO, 1).map(|_| ()),
        e.dequeue().map(|_| ()),
        e.post_se(1),
        e.resize(8),
        e.enable(),
        e.set_unwaitable(),
    ] {
        assert_eq!(r.unwrap_err().kind(), dat::ErrorType::InvalidHandle);
    }
    Outcome::Pass
}

/// A wait blocked on an EVD of an IA closed abruptly returns (no hang).
pub fn wait_released_by_ia_close(t: &dyn Target) -> Outcome {
    let (ia, e) = sw(t, 4);
    let e2 = e.clone();
    let h = std::thread::spawn(move || e2.wait(crate::harness::WAIT, 1));
    let deadline = Instant::now() + Duration::from_secs(10);
    while e.resize(4) != Err(DatError::invalid_state(Subtype::StateEvdWaiter)) {
        assert!(Instant::now() < deadline, "waiter never registered");
        std::thread::sleep(Duration::from_millis(1));
    }
    ia.close(CloseFlags::Abrupt).unwrap();
    let r = h.join().expect("waiter thread");
    assert_eq!(
        r.unwrap_err().kind(),
        dat::ErrorType::Abort,
        "released, not timed out"
    );
    Outcome::Pass
}

/// Polls until a thread is blocked in `cno.wait` (a second waiter is refused with the bare
/// `DAT_INVALID_STATE` while one is).
fn cno_waiter_registered(cno: &dat::Cno) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match cno.wait(Timeout::ZERO) {
            Err(e) if e == DatError::invalid_state(Subtype::NoSubtype) => return,
            Err(e) => assert_eq!(e, DatError::TIMEOUT_EXPIRED),
            Ok(v) => panic!("untriggered CNO returned {v:?}"),
        }
        assert!(Instant::now() < deadline, "CNO waiter never registered");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One CNO waiter at a time; the blocked one is woken by a trigger.
pub fn cno_single_waiter(t: &dyn Target) -> Outcome {
    let ia = t.open_pair().0;
    let cno = ia.create_cno().unwrap();
    let e = ia.create_evd(4, EvdFlags::SOFTWARE, Some(&cno)).unwrap();
    let c2 = cno.clone();
    let h = std::thread::spawn(move || c2.wait(crate::harness::WAIT));
    cno_waiter_registered(&cno);
    e.post_se(3).unwrap();
    assert_eq!(h.join().expect("waiter thread"), Ok(Some(e.id())));
    Outcome::Pass
}

/// A CNO freed while a thread waits on it releases the waiter with
/// `DAT_INVALID_STATE | DAT_INVALID_STATE_CNO_DEAD`.
pub fn cno_freed_while_waiting(t: &dyn Target) -> Outcome {
    let ia = t.open_pair().0;
    let cno = ia.create_cno().unwrap();
    let c2 = cno.clone();
    let h = std::thread::spawn(move || c2.wait(crate::harness::WAIT));
    cno_waiter_registered(&cno);
    cno.free().unwrap();
    assert_eq!(
        h.join().expect("waiter thread"),
        Err(DatError::invalid_state(Subtype::StateCnoDead))
    );
    Outcome::Pass
}
