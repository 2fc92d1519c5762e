//! Two pollers that *start* on one CPU of several: are they spread out once they may move?
//! (issue 5, session 8). The echo and the ping thread of one connection pin themselves to
//! CPU 0 and run a ping-pong there, then both allow every CPU again and go on; the example
//! prints, per phase of `ROUNDS` round trips after the release, the CPUs both threads ran on
//! at its end and the mean half round trip, and the shm naps of the run. A pair that stays
//! on one CPU although another is idle is the two-core regression that session 7's pacing
//! variants caused (`BENCHMARKS.md`). Wall clock: run it on a quiet machine, under the
//! benchmark lock.
//!
//! ```text
//! cargo build --release -p dat-provider-shm --example glued_start
//! flock /tmp/datrs-perf.lock target/release/examples/glued_start
//! ```

use std::sync::Barrier;
use std::time::{Duration, Instant};

use dat::EventData;
use dat::types::{CloseFlags, CompletionFlags, Cookie, DtoOp};

#[path = "../benches/pair/mod.rs"]
mod pair;
use pair::{End, pair_with};

/// Round trips pinned, then per phase after the release.
const ROUNDS: u64 = 20_000;
/// Phases after the release.
const PHASES: usize = 5;

/// Sets the calling thread's CPUs (`None`: every CPU the process may use).
fn pin(cpu: Option<usize>) {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes only inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // Not `available_parallelism`: it counts the calling thread's current affinity, which is
    // CPU 0 alone once pinned.
    // SAFETY: plain query without pointers.
    let n = usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).unwrap_or(1);
    for c in cpu.map_or(0..n, |c| c..c + 1) {
        // SAFETY: as above (`c` is below CPU_SETSIZE on any machine this runs on).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: sets the calling thread's affinity from the set built above.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

fn cpu() -> i32 {
    // SAFETY: no argument; reads the calling thread's state.
    unsafe { libc::sched_getcpu() }
}

/// Polls until a receive completes.
fn recv(e: &End) {
    loop {
        if let Ok(ev) = e.dto.dequeue() {
            let EventData::Dto(c) = ev.data else {
                panic!("{ev:?}")
            };
            assert_eq!(c.operation, DtoOp::Receive);
            return;
        }
        std::hint::spin_loop();
    }
}

fn post_recv(e: &End) {
    e.ep.post_recv(&[e.lmr.triplet(0, 8)], Cookie(0), CompletionFlags::DEFAULT)
        .unwrap();
}

fn post_send(e: &End) {
    e.ep.post_send(
        &[e.lmr.triplet(1 << 19, 8)],
        Cookie(1),
        CompletionFlags::SUPPRESS,
    )
    .unwrap();
}

#[allow(clippy::print_stderr)] // an example that reports what it measured
fn main() {
    let (a, b) = pair_with(8997, "");
    let total = ROUNDS * (PHASES as u64 + 1);
    let start = Barrier::new(2);
    let release = Barrier::new(2);
    let phases: Vec<(i32, i32, f64)> = std::thread::scope(|s| {
        let echo = s.spawn(|| {
            pin(Some(0));
            post_recv(&b);
            start.wait();
            let mut cpus = Vec::new();
            for i in 0..total {
                if i == ROUNDS {
                    release.wait();
                    pin(None);
                }
                recv(&b);
                post_recv(&b);
                post_send(&b);
                if i >= ROUNDS && (i + 1) % ROUNDS == 0 {
                    cpus.push(cpu());
                }
            }
            cpus
        });
        pin(Some(0));
        start.wait();
        let mut out = Vec::new();
        let mut t = Instant::now();
        for i in 0..total {
            if i == ROUNDS {
                release.wait();
                pin(None);
                t = Instant::now();
            }
            post_recv(&a);
            post_send(&a);
            recv(&a);
            if i >= ROUNDS && (i + 1) % ROUNDS == 0 {
                let us = t.elapsed().as_secs_f64() * 1e6 / ROUNDS as f64 / 2.0;
                out.push((cpu(), 0, us));
                t = Instant::now();
            }
        }
        let echo_cpus = echo.join().unwrap();
        out.iter()
            .zip(echo_cpus)
            .map(|(&(p, _, us), e)| (p, e, us))
            .collect()
    });
    for (i, (p, e, us)) in phases.iter().enumerate() {
        eprintln!("phase {i}: ping on CPU {p}, echo on CPU {e}, {us:.3} us per half round trip");
    }
    eprintln!("{:?}", dat_provider_shm::nap_counts());
    let _ = a.ia.close(CloseFlags::Abrupt);
    let _ = b.ia.close(CloseFlags::Abrupt);
    std::thread::sleep(Duration::from_millis(1));
}
