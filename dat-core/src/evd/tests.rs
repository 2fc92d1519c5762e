//! Tests of the EVD queue rules (reference 6.4, 6.5).

use super::*;
use crate::types::{CompletionFlags, Cookie, DtoOp, DtoStatus, EpId, EvdId};

const CNO: CnoId = CnoId(9);

fn all_merge(_: EvdFlags) -> bool {
    true
}

fn queue(qlen: i32, flags: EvdFlags) -> EvdQueue {
    match EvdQueue::new(qlen, flags, 100, all_merge) {
        Ok(q) => q,
        Err(e) => panic!("test queue: {e:?}"),
    }
}

fn dto_q(qlen: i32) -> EvdQueue {
    queue(qlen, EvdFlags::DTO | EvdFlags::SOFTWARE)
}

fn completion(ep: u32, cookie: u64, status: DtoStatus) -> Event {
    Event::dto(DtoCompletion {
        ep: EpId(ep),
        cookie: Cookie(cookie),
        status,
        transferred_length: 64,
        operation: DtoOp::Receive,
        rmr_context: 0,
    })
}

fn ok(cookie: u64) -> Event {
    completion(1, cookie, DtoStatus::Success)
}

const QUEUED: Push = Push::Queued {
    wake: false,
    trigger_cno: None,
};
const WAKE: Push = Push::Queued {
    wake: true,
    trigger_cno: None,
};
const TRIGGER: Push = Push::Queued {
    wake: false,
    trigger_cno: Some(CNO),
};

const ARG2: u32 = 0x8006_0026;
const ARG3: u32 = 0x8006_0027;
const ARG4: u32 = 0x8006_0028;
const TEVD: u32 = 0x8003_0005;
const INVALID_STATE: u32 = 0x8007_0000;
const UNWAITABLE: u32 = 0x8007_0049;
const WAITER: u32 = 0x8007_004E;

fn raw<T: std::fmt::Debug>(r: DatResult<T>) -> u32 {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_raw(),
    }
}

#[test]
fn create_validates_in_ofa_order() {
    let bad_bits = EvdFlags::from_bits_retain(0x200);
    // (min_qlen, flags, max_evd_qlen, merge allowed, expected raw code or 0 for success)
    let cases: &[(i32, EvdFlags, u32, bool, u32)] = &[
        (0, EvdFlags::DTO, 10, true, ARG2),
        (-1, EvdFlags::DTO, 10, true, ARG2),
        (i32::MIN, EvdFlags::DTO, 10, true, ARG2),
        (11, EvdFlags::DTO, 10, true, TEVD),
        (1, EvdFlags::DTO, 0, true, TEVD),
        (10, EvdFlags::DTO, 10, true, 0),
        (1, EvdFlags::DTO, 10, true, 0),
        (0, bad_bits, 10, false, ARG2),
        (11, bad_bits, 10, false, TEVD),
        (5, EvdFlags::empty(), 10, true, ARG4),
        (5, bad_bits, 10, true, ARG4),
        (
            5,
            EvdFlags::DTO | EvdFlags::from_bits_retain(0x002),
            10,
            true,
            ARG4,
        ),
        (5, EvdFlags::DTO | EvdFlags::CONNECTION, 10, false, ARG4),
        (5, EvdFlags::DEFAULT | EvdFlags::SOFTWARE, 10, true, 0),
    ];
    for &(min_qlen, flags, max, merge, want) in cases {
        let got = EvdQueue::new(min_qlen, flags, max, |_| merge);
        match got {
            Ok(q) => {
                assert_eq!(want, 0, "{min_qlen} {flags:?} {max}");
                assert_eq!(q.qlen(), min_qlen as u32);
                assert_eq!(q.flags(), flags);
                assert!(q.is_empty());
            }
            Err(e) => assert_eq!(e.to_raw(), want, "{min_qlen} {flags:?} {max}"),
        }
    }
}

#[test]
fn create_asks_merge_ok_about_exactly_the_flags() {
    let flags = EvdFlags::DTO | EvdFlags::RMR_BIND;
    let seen = std::cell::Cell::new(EvdFlags::empty());
    let q = EvdQueue::from_config(
        EvdConfig {
            min_qlen: 3,
            flags,
            max_evd_qlen: 8,
        },
        |f| {
            seen.set(f);
            true
        },
    );
    assert!(q.is_ok());
    assert_eq!(seen.get(), flags);
}

#[test]
fn new_queue_state_and_param() {
    let q = dto_q(4);
    assert_eq!(
        q.param(),
        EvdParam {
            qlen: 4,
            state: EvdState::ENABLED | EvdState::WAITABLE | EvdState::CONFIG_THRESHOLD,
            cno: None,
            flags: EvdFlags::DTO | EvdFlags::SOFTWARE,
        }
    );
    assert_eq!(q.param().state.bits(), 0x35);
    assert_eq!(q.wait_status(), WaitStatus::Continue);
    assert!(!q.has_waiter() && !q.is_dead() && q.is_enabled() && q.is_waitable());
}

#[test]
fn fifo_order_and_bare_queue_empty() {
    let mut q = dto_q(8);
    for c in 0..5 {
        assert_eq!(q.push(ok(c), Signal::Normal), QUEUED);
    }
    assert_eq!(q.len(), 5);
    for c in 0..5 {
        assert_eq!(q.dequeue(), Ok(ok(c)));
    }
    assert_eq!(q.dequeue(), Err(DatError::QUEUE_EMPTY));
    assert_eq!(raw(q.dequeue()), 0x000D_0000);
}

#[test]
fn pushes_never_allocate() {
    let mut q = dto_q(16);
    let cap = q.queue.capacity();
    assert!(cap >= 16);
    for c in 0..16 {
        q.push(ok(c), Signal::Normal);
    }
    assert_eq!(q.push(ok(99), Signal::Normal), Push::Overflow);
    assert_eq!(q.queue.capacity(), cap);
}

#[test]
fn overflow_drops_the_event_and_keeps_a_normal_evd_alive() {
    let mut q = dto_q(2);
    assert_eq!(q.push(ok(1), Signal::Normal), QUEUED);
    assert_eq!(q.push(ok(2), Signal::Normal), QUEUED);
    assert_eq!(q.push(ok(3), Signal::Normal), Push::Overflow);
    assert_eq!(q.len(), 2);
    assert!(!q.is_dead());
    assert_eq!(q.dequeue(), Ok(ok(1)));
    assert_eq!(q.push(ok(4), Signal::Normal), QUEUED);
    assert_eq!(q.dequeue(), Ok(ok(2)));
    assert_eq!(q.dequeue(), Ok(ok(4)));
}

#[test]
fn async_evd_overflow_kills_it() {
    let mut q = queue(1, EvdFlags::ASYNC);
    assert!(q.is_async());
    let ev = Event::evd_overflow(AsyncHandle::Evd(EvdId(3)));
    assert_eq!(q.push(ev.clone(), Signal::Normal), QUEUED);
    assert_eq!(q.push(ev.clone(), Signal::Normal), Push::Overflow);
    assert!(q.is_dead());
    assert_eq!(q.wait_status(), WaitStatus::Dead);
    assert_eq!(raw(q.dequeue()), INVALID_STATE);
    assert_eq!(raw(q.begin_wait(1, false)), INVALID_STATE);
    assert_eq!(q.try_complete_wait(1), None);
    // Dead for good: even after the queue has room nothing more is taken.
    assert_eq!(q.push(ev, Signal::Normal), Push::Overflow);
    assert_eq!(
        WaitStatus::Dead.error().map(DatError::to_raw),
        Some(INVALID_STATE)
    );
}

#[test]
fn async_evd_death_reaches_a_blocked_waiter() {
    let mut q = queue(2, EvdFlags::ASYNC);
    assert_eq!(q.begin_wait(2, true), Ok(()));
    let ev = Event::async_error(EventNumber::AsyncEpBroken, AsyncHandle::Ep(EpId(1)), 0);
    assert_eq!(q.push(ev.clone(), Signal::Normal), QUEUED);
    assert_eq!(q.push(ev.clone(), Signal::Normal), WAKE);
    assert_eq!(q.push(ev, Signal::Normal), Push::Overflow);
    assert_eq!(q.try_complete_wait(2), None);
    assert_eq!(q.wait_status(), WaitStatus::Dead);
    q.end_wait();
    assert_eq!(raw(q.dequeue()), INVALID_STATE);
}

#[test]
fn events_of_foreign_streams_and_malformed_events_are_rejected() {
    let mut q = queue(4, EvdFlags::DTO);
    let foreign = [
        Event::connection(EventNumber::Established, EpId(1), Vec::new()),
        Event::software(1),
        Event::evd_overflow(AsyncHandle::Ia),
        Event::rmr_bind(crate::types::RmrId(1), Cookie(1), DtoStatus::Success),
        Event {
            number: EventNumber::DtoCompletion,
            data: EventData::Software { pointer: 1 },
        },
    ];
    for ev in foreign {
        assert_eq!(q.push(ev, Signal::Normal), Push::Rejected);
    }
    assert!(q.is_empty());
}

#[test]
fn threshold_validation() {
    // (threshold, threshold_allowed, expected raw code or 0), on a queue of length 4.
    let cases: &[(i32, bool, u32)] = &[
        (1, false, 0),
        (1, true, 0),
        (2, true, 0),
        (4, true, 0),
        (0, true, ARG3),
        (-1, true, ARG3),
        (i32::MIN, true, ARG3),
        (5, true, ARG3),
        (i32::MAX, true, ARG3),
        (2, false, ARG3),
        (4, false, ARG3),
    ];
    for &(threshold, allowed, want) in cases {
        let mut q = dto_q(4);
        match q.begin_wait(threshold, allowed) {
            Ok(()) => {
                assert_eq!(want, 0, "{threshold} {allowed}");
                assert!(q.has_waiter());
            }
            Err(e) => {
                assert_eq!(e.to_raw(), want, "{threshold} {allowed}");
                assert!(!q.has_waiter());
            }
        }
    }
}

#[test]
fn wait_validation_order() {
    // Unwaitable beats everything.
    let mut q = dto_q(4);
    assert_eq!(q.begin_wait(1, false), Ok(()));
    q.set_unwaitable();
    assert_eq!(raw(q.begin_wait(0, false)), UNWAITABLE);
    // A registered waiter beats a bad threshold.
    q.clear_unwaitable();
    assert_eq!(raw(q.begin_wait(0, false)), WAITER);
    assert_eq!(raw(q.begin_wait(1, false)), WAITER);
    q.end_wait();
    assert_eq!(q.begin_wait(1, false), Ok(()));
}

#[test]
fn wait_completes_at_threshold_with_nmore() {
    let mut q = dto_q(8);
    assert_eq!(q.begin_wait(3, true), Ok(()));
    assert_eq!(q.push(ok(1), Signal::Normal), QUEUED);
    assert_eq!(q.try_complete_wait(3), None);
    assert_eq!(q.push(ok(2), Signal::Normal), QUEUED);
    assert_eq!(q.try_complete_wait(3), None);
    assert_eq!(q.push(ok(3), Signal::Normal), WAKE);
    assert_eq!(q.push(ok(4), Signal::Normal), WAKE);
    assert_eq!(q.try_complete_wait(3), Some((ok(1), 3)));
    q.end_wait();
    assert!(!q.has_waiter());
    // A fresh threshold-1 wait drains the rest, nmore counting down.
    assert_eq!(q.begin_wait(1, false), Ok(()));
    assert_eq!(q.try_complete_wait(1), Some((ok(2), 2)));
    assert_eq!(q.try_complete_wait(1), Some((ok(3), 1)));
    assert_eq!(q.try_complete_wait(1), Some((ok(4), 0)));
    assert_eq!(q.try_complete_wait(1), None);
    q.end_wait();
}

#[test]
fn a_registered_waiter_excludes_dequeue_and_a_second_waiter() {
    let mut q = dto_q(4);
    q.push(ok(1), Signal::Normal);
    assert_eq!(q.begin_wait(2, true), Ok(()));
    assert_eq!(raw(q.dequeue()), WAITER);
    assert_eq!(raw(q.begin_wait(1, false)), WAITER);
    assert_eq!(q.len(), 1);
    q.end_wait();
    assert_eq!(q.dequeue(), Ok(ok(1)));
}

#[test]
fn unwaitable_rules() {
    let mut q = dto_q(4);
    assert!(!q.set_unwaitable(), "no waiter to wake");
    assert_eq!(raw(q.begin_wait(1, false)), UNWAITABLE);
    assert_eq!(q.param().state & EvdState::UNWAITABLE, EvdState::UNWAITABLE);
    assert!(!q.param().state.contains(EvdState::WAITABLE));
    // Dequeue is unaffected.
    q.push(ok(1), Signal::Normal);
    assert_eq!(q.dequeue(), Ok(ok(1)));
    q.clear_unwaitable();
    assert!(q.param().state.contains(EvdState::WAITABLE));
    assert_eq!(q.begin_wait(1, false), Ok(()));
    // Made unwaitable while a waiter is registered: the caller must wake it, and it fails
    // even though an event is there.
    assert!(q.set_unwaitable());
    q.push(ok(2), Signal::Normal);
    assert_eq!(q.try_complete_wait(1), None);
    assert_eq!(q.wait_status(), WaitStatus::Unwaitable);
    assert_eq!(
        q.wait_status().error().map(DatError::to_raw),
        Some(UNWAITABLE)
    );
    q.end_wait();
    assert_eq!(WaitStatus::Continue.error(), None);
}

#[test]
fn resize_rules() {
    // (new min_qlen, waiter registered, expected raw code or 0); 3 events queued, qlen 4,
    // max_evd_qlen 100.
    let cases: &[(i32, bool, u32)] = &[
        (0, false, ARG2),
        (-5, false, ARG2),
        (101, false, ARG2),
        (i32::MAX, false, ARG2),
        (2, false, INVALID_STATE),
        (3, false, 0),
        (100, false, 0),
        (5, true, WAITER),
        (0, true, ARG2),
        (2, true, WAITER),
    ];
    for &(new, waiter, want) in cases {
        let mut q = dto_q(4);
        for c in 0..3 {
            q.push(ok(c), Signal::Normal);
        }
        if waiter {
            assert_eq!(q.begin_wait(4, true), Ok(()));
        }
        match q.resize(new) {
            Ok(()) => {
                assert_eq!(want, 0, "{new} {waiter}");
                assert_eq!(q.qlen(), new as u32);
                assert_eq!(q.param().qlen, new as u32);
                assert!(q.queue.capacity() >= new as usize);
                for c in 0..3 {
                    assert_eq!(q.dequeue(), Ok(ok(c)));
                }
            }
            Err(e) => {
                assert_eq!(e.to_raw(), want, "{new} {waiter}");
                assert_eq!(q.qlen(), 4);
                assert_eq!(q.len(), 3);
            }
        }
    }
}

#[test]
fn resize_changes_the_overflow_point_and_the_threshold_limit() {
    let mut q = dto_q(2);
    assert_eq!(q.resize(3), Ok(()));
    for c in 0..3 {
        assert_eq!(q.push(ok(c), Signal::Normal), QUEUED);
    }
    assert_eq!(q.push(ok(3), Signal::Normal), Push::Overflow);
    assert_eq!(q.begin_wait(3, true), Ok(()));
    q.end_wait();
    assert_eq!(raw(q.begin_wait(4, true)), ARG3);
    assert_eq!(raw(q.resize(2)), INVALID_STATE);
}

#[test]
fn post_se_validation() {
    let sw = Event::software(0xfeed);
    let mut no_sw = queue(4, EvdFlags::DTO);
    assert_eq!(raw(no_sw.post_se(&sw)), 0x8006_0025);
    // ARG1 is checked before the event.
    assert_eq!(raw(no_sw.post_se(&ok(1))), 0x8006_0025);

    let mut q = queue(1, EvdFlags::SOFTWARE);
    let bad = [
        ok(1),
        Event {
            number: EventNumber::Software,
            data: EventData::Dto(DtoCompletion {
                ep: EpId(1),
                cookie: Cookie(1),
                status: DtoStatus::Success,
                transferred_length: 0,
                operation: DtoOp::Send,
                rmr_context: 0,
            }),
        },
        Event {
            number: EventNumber::DtoCompletion,
            data: EventData::Software { pointer: 1 },
        },
        Event::connection(EventNumber::Established, EpId(1), Vec::new()),
    ];
    for ev in &bad {
        assert_eq!(raw(q.post_se(ev)), ARG2, "{ev:?}");
    }
    assert!(q.is_empty());
    assert_eq!(q.post_se(&sw), Ok(QUEUED));
    assert_eq!(q.post_se(&sw), Ok(Push::Overflow));
    assert_eq!(q.dequeue(), Ok(Event::software(0xfeed)));
}

#[test]
fn cno_triggering_and_waking() {
    // (enabled, waiter with threshold 1, cno attached, signal, status, expected push)
    use DtoStatus::{Flushed, Success};
    use Signal::{Normal, Solicited, Unsignalled};
    let cases: &[(bool, bool, bool, Signal, DtoStatus, Push)] = &[
        (true, false, true, Normal, Success, TRIGGER),
        (true, false, true, Solicited, Success, TRIGGER),
        (true, false, false, Normal, Success, QUEUED),
        (false, false, true, Normal, Success, QUEUED),
        (false, false, true, Normal, Flushed, QUEUED),
        (true, true, true, Normal, Success, WAKE),
        (false, true, true, Normal, Success, WAKE),
        (true, true, true, Unsignalled, Success, QUEUED),
        (true, false, true, Unsignalled, Success, QUEUED),
        (true, false, true, Unsignalled, Flushed, TRIGGER),
        (true, true, true, Unsignalled, Flushed, WAKE),
    ];
    for &(enabled, waiter, cno, signal, status, want) in cases {
        let mut q = dto_q(4);
        if !enabled {
            q.disable();
        }
        if cno {
            q.set_cno(Some(CNO));
        }
        if waiter {
            assert_eq!(q.begin_wait(1, false), Ok(()));
        }
        let got = q.push(completion(1, 1, status), signal);
        assert_eq!(
            got, want,
            "enabled {enabled} waiter {waiter} cno {cno} {signal:?} {status:?}"
        );
        assert_eq!(q.len(), 1, "queued in every case");
    }
}

#[test]
fn enable_disable_toggle_triggering_and_state_bits() {
    let mut q = dto_q(4);
    q.set_cno(Some(CNO));
    assert_eq!(q.cno(), Some(CNO));
    q.disable();
    assert!(!q.is_enabled());
    assert_eq!(
        q.param().state & (EvdState::ENABLED | EvdState::DISABLED),
        EvdState::DISABLED
    );
    assert_eq!(q.push(ok(1), Signal::Normal), QUEUED);
    // Disabled EVDs still dequeue and wait.
    assert_eq!(q.dequeue(), Ok(ok(1)));
    q.enable();
    assert_eq!(
        q.param().state & (EvdState::ENABLED | EvdState::DISABLED),
        EvdState::ENABLED
    );
    assert_eq!(q.push(ok(2), Signal::Normal), TRIGGER);
    q.set_cno(None);
    assert_eq!(q.push(ok(3), Signal::Normal), QUEUED);
    assert_eq!(q.param().cno, None);
}

#[test]
fn solicited_mode() {
    // (mode, event, signal, wakes the threshold-1 waiter)
    let sw = Event::software(1);
    let failed = completion(1, 1, DtoStatus::RemoteAccess);
    let cases: &[(NotifyMode, &Event, Signal, bool)] = &[
        (NotifyMode::Solicited, &ok(1), Signal::Normal, false),
        (NotifyMode::Solicited, &ok(1), Signal::Solicited, true),
        (NotifyMode::Solicited, &ok(1), Signal::Unsignalled, false),
        (NotifyMode::Solicited, &failed, Signal::Normal, true),
        (NotifyMode::Solicited, &sw, Signal::Normal, true),
        (NotifyMode::Threshold, &ok(1), Signal::Normal, true),
        (NotifyMode::Notify, &ok(1), Signal::Normal, true),
        (NotifyMode::Notify, &ok(1), Signal::Solicited, true),
    ];
    for &(mode, ev, signal, wake) in cases {
        let mut q = dto_q(4);
        q.set_notify_mode(mode);
        assert_eq!(q.notify_mode(), mode);
        assert_eq!(q.begin_wait(1, false), Ok(()));
        assert_eq!(
            q.push(ev.clone(), signal),
            Push::Queued {
                wake,
                trigger_cno: None
            },
            "{mode:?} {ev:?} {signal:?}"
        );
        // Without a waiter the same decision governs the CNO.
        q.end_wait();
        q.set_cno(Some(CNO));
        let trigger = if wake { Some(CNO) } else { None };
        assert_eq!(
            q.push(ev.clone(), signal),
            Push::Queued {
                wake: false,
                trigger_cno: trigger
            }
        );
    }
}

#[test]
fn notify_mode_state_bits() {
    let cases = [
        (NotifyMode::Notify, 0x10),
        (NotifyMode::Solicited, 0x20),
        (NotifyMode::Threshold, 0x30),
    ];
    for (mode, bits) in cases {
        let mut q = dto_q(1);
        q.set_notify_mode(mode);
        assert_eq!(q.param().state.bits() & 0x30, bits, "{mode:?}");
    }
}

#[test]
fn silent_events_count_for_a_later_wait() {
    let mut q = dto_q(4);
    assert_eq!(q.push(ok(1), Signal::Unsignalled), QUEUED);
    assert_eq!(q.push(ok(2), Signal::Unsignalled), QUEUED);
    assert_eq!(q.begin_wait(2, true), Ok(()));
    assert_eq!(q.try_complete_wait(2), Some((ok(1), 1)));
    q.end_wait();
}

#[test]
fn signal_from_completion_flags() {
    let cases = [
        (
            CompletionFlags::DEFAULT,
            false,
            Signal::Normal,
            Signal::Normal,
        ),
        (
            CompletionFlags::UNSIGNALLED,
            false,
            Signal::Unsignalled,
            Signal::Unsignalled,
        ),
        (
            CompletionFlags::UNSIGNALLED | CompletionFlags::SUPPRESS,
            false,
            Signal::Unsignalled,
            Signal::Unsignalled,
        ),
        (
            CompletionFlags::EVD_THRESHOLD,
            false,
            Signal::Normal,
            Signal::Normal,
        ),
        (
            CompletionFlags::DEFAULT,
            true,
            Signal::Normal,
            Signal::Solicited,
        ),
        (
            CompletionFlags::UNSIGNALLED,
            true,
            Signal::Unsignalled,
            Signal::Solicited,
        ),
    ];
    for (flags, solicited, request, receive) in cases {
        assert_eq!(Signal::for_request(flags), request, "{flags:?}");
        assert_eq!(
            Signal::for_receive(flags, solicited),
            receive,
            "{flags:?} {solicited}"
        );
    }
}

#[test]
fn drain_for_removes_only_matching_events_in_order() {
    let mut q = queue(8, EvdFlags::DTO | EvdFlags::CONNECTION | EvdFlags::SOFTWARE);
    let evs = [
        completion(1, 1, DtoStatus::Success),
        completion(2, 2, DtoStatus::Success),
        Event::software(3),
        Event::connection(EventNumber::Disconnected, EpId(1), Vec::new()),
        completion(2, 4, DtoStatus::Flushed),
        completion(1, 5, DtoStatus::Flushed),
    ];
    for ev in &evs {
        assert_eq!(q.push(ev.clone(), Signal::Normal), QUEUED);
    }
    assert_eq!(q.drain_for(|e| e.ep() == Some(EpId(1))), 3);
    assert_eq!(q.drain_for(|e| e.ep() == Some(EpId(7))), 0);
    for i in [1, 2, 4] {
        assert_eq!(q.dequeue(), Ok(evs[i].clone()));
    }
    assert!(q.is_empty());
}

/// `push_dto` decides exactly as `push` of the same completion as an event, in every
/// configuration that changes a decision: stream flags, async, mode, waiter, CNO, enabled,
/// full or dead queue, status and signal.
#[test]
fn push_dto_decides_as_push() {
    let signals = [Signal::Normal, Signal::Unsignalled, Signal::Solicited];
    let statuses = [DtoStatus::Success, DtoStatus::Flushed];
    let flag_sets = [
        EvdFlags::DTO,
        EvdFlags::DTO | EvdFlags::ASYNC,
        EvdFlags::SOFTWARE,
        EvdFlags::CONNECTION | EvdFlags::CR,
    ];
    let modes = [
        NotifyMode::Notify,
        NotifyMode::Solicited,
        NotifyMode::Threshold,
    ];
    let mut cases = 0;
    for flags in flag_sets {
        for mode in modes {
            for setup in 0..6u8 {
                for status in statuses {
                    for signal in signals {
                        let make = || {
                            let mut q = queue(2, flags);
                            q.set_notify_mode(mode);
                            match setup {
                                1 => q.set_cno(Some(CNO)),
                                2 => {
                                    q.set_cno(Some(CNO));
                                    q.disable();
                                }
                                3 => q.begin_wait(1, true).unwrap(),
                                4 => {
                                    // Full (and for an async EVD, dead after one more).
                                    let _ = q.push(ok(1), Signal::Normal);
                                    let _ = q.push(ok(2), Signal::Normal);
                                    let _ = q.push(ok(3), Signal::Normal);
                                }
                                5 => q.begin_wait(2, true).unwrap(),
                                _ => {}
                            }
                            q
                        };
                        let (mut a, mut b) = (make(), make());
                        let c = DtoCompletion {
                            ep: EpId(3),
                            cookie: Cookie(77),
                            status,
                            transferred_length: 8,
                            operation: DtoOp::Send,
                            rmr_context: 0,
                        };
                        let want = a.push(Event::dto(c), signal);
                        assert_eq!(
                            b.push_dto(c, signal),
                            want,
                            "{flags:?} {mode:?} setup {setup} {status:?} {signal:?}"
                        );
                        assert_eq!((a.len(), a.is_dead()), (b.len(), b.is_dead()));
                        a.end_wait();
                        b.end_wait();
                        assert_eq!(a.dequeue(), b.dequeue());
                        cases += 1;
                    }
                }
            }
        }
    }
    assert_eq!(cases, 4 * 3 * 6 * 2 * 3);
}
