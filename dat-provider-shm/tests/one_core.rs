//! Two pollers sharing one core must hand it to each other per message (spin, then yield),
//! not spin through a scheduler slice each (issue 5). Counted, not timed: the facade's pacing
//! counts the polled waits that spun 4 096 empty polls or more before their work came
//! (`dat::pace_counts().slice_waits`); a collapsed ping-pong makes one per message.
//!
//! Its own test binary: the counts are per process.
//!
//! It failed with hundreds of slice waits before session 8 (dat-provider-shm/BENCHMARKS.md):
//! since then a poll that finds the peer's polling thread on its CPU naps on the rings and
//! the peer's next record wakes it (`ia/nap.rs`), which the naps counted here show too.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use dat::types::{CompletionFlags, Cookie, DtoOp};
use dat::{Evd, EventData};

/// Round trips counted.
const ROUND_TRIPS: u64 = 2_000;

/// Pins the calling thread (and the threads it starts later) to the CPU it runs on.
fn pin_here() {
    // SAFETY: `sched_getcpu` takes no argument and only reads the calling thread's state.
    let cpu = unsafe { libc::sched_getcpu() };
    assert!(cpu >= 0, "{}", std::io::Error::last_os_error());
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes only inside it (`cpu` is
    // below CPU_SETSIZE: the kernel numbered it).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    // SAFETY: pins the calling thread (pid 0) to the set built above, which outlives the call.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

/// Polls `evd` with `Evd::dequeue` (the facade's paced busy poll) until a receive completes;
/// bounded at 60 s.
fn poll_recv(evd: &Evd) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut polls = 0u32;
    loop {
        match evd.dequeue() {
            Ok(ev) => {
                let EventData::Dto(c) = ev.data else {
                    panic!("{ev:?}")
                };
                assert_eq!(c.operation, DtoOp::Receive, "{c:?}");
                return;
            }
            Err(e) => assert_eq!(e, dat::DatError::QUEUE_EMPTY),
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(4096) {
            assert!(Instant::now() < deadline, "no message within 60 s");
        }
        std::hint::spin_loop();
    }
}

#[test]
fn two_pollers_on_one_core_hand_it_over_per_message() {
    // Both IAs' provider threads and the echo thread start after this: all on one CPU.
    pin_here();
    let dir = scratch("onecore");
    let reg = registry(&dir, "");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let _sp = connect_pair(&a, &b, 4950);
    let b = Arc::new(b);
    let polling = Arc::new(AtomicBool::new(false));
    let echo = {
        let (b, polling) = (b.clone(), polling.clone());
        std::thread::spawn(move || {
            let buf = [b.lmr.triplet(0, 8)];
            b.ep.post_recv(&buf, Cookie(0), CompletionFlags::DEFAULT)
                .unwrap();
            polling.store(true, Ordering::Release);
            for i in 0..=ROUND_TRIPS {
                poll_recv(&b.dto);
                b.ep.post_recv(&buf, Cookie(i + 1), CompletionFlags::DEFAULT)
                    .unwrap();
                b.ep.post_send(&buf, Cookie(i), CompletionFlags::SUPPRESS)
                    .unwrap();
            }
        })
    };
    while !polling.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    // The echo thread polls an empty EVD while another thread computes past a scheduler
    // slice and this one sleeps: preempted while it spun, the echo thread counts as contended
    // and from then on yields as soon as it has answered. That is the state the collapse was
    // seen in: this thread, fresh to polling, waits for an answer that comes within
    // microseconds of its peer getting the CPU, so it is never off its CPU for long.
    std::thread::spawn(|| {
        let until = Instant::now() + Duration::from_millis(30);
        let mut x = 0u64;
        while Instant::now() < until {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
    })
    .join()
    .unwrap();
    // The pinging end runs on a thread of its own, fresh to polling (the pacing state is
    // per thread) and placed by the scheduler beside the echo thread as a new task.
    let (before, after) = std::thread::spawn(move || {
        let buf = [a.lmr.triplet(64, 8)];
        let recv = [a.lmr.triplet(128, 8)];
        let ping = |i: u64| {
            a.ep.post_recv(&recv, Cookie(i), CompletionFlags::DEFAULT)
                .unwrap();
            a.ep.post_send(&buf, Cookie(i), CompletionFlags::SUPPRESS)
                .unwrap();
            poll_recv(&a.dto);
        };
        ping(0);
        let before = dat::pace_counts();
        for i in 1..=ROUND_TRIPS {
            ping(i);
        }
        (before, dat::pace_counts())
    })
    .join()
    .unwrap();
    echo.join().unwrap();
    let slices = after.slice_waits - before.slice_waits;
    let naps = dat_provider_shm::nap_counts();
    // Collapsed: about one per message of the thread that was not found contended. Handed
    // over: none, or a few (a wait that met a preemption).
    assert!(
        slices <= ROUND_TRIPS / 20,
        "{slices} waits of {} messages spun through a slice ({before:?} -> {after:?}, {naps:?})",
        2 * ROUND_TRIPS
    );
    // The pollers napped, and the naps were ended by the peer's records (or by the upcalls
    // of the provider thread that took them first), not by their timeout: a nap that slept
    // its millisecond out would be a slice wait of another kind. Pinned, no nap moved them
    // apart: they handed the CPU over by yields between the naps.
    assert!(naps.naps > 0 && naps.yields > 0, "{naps:?}");
    assert!(
        naps.slept_out <= 2.max(naps.slept / 20),
        "naps slept out: {naps:?}"
    );
}
