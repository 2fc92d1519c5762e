//! A deterministic ping-pong for counting the cost of the send/receive path with `perf stat`
//! (instructions and cycles per round trip do not depend on the machine's load, unlike wall
//! clock): one thread drives both ends of a connection between two shm IAs, in the pattern
//! of `datperf lat` (a receive posted, then a send whose completion is suppressed; the peer
//! echoes). Every poll finds its completion at once, so no instruction is spent waiting.
//!
//! ```text
//! cargo build --release -p dat-provider-shm --example rtt_count
//! perf stat -e instructions:u,cycles:u target/release/examples/rtt_count 8 100000
//! perf stat -e instructions:u,cycles:u target/release/examples/rtt_count 8 300000
//! ```
//! The difference of the two counts over 200000 is the cost of one round trip (both ends);
//! `two` as a third argument runs the echo end on its own thread instead (as `datperf`
//! does: the counts then include the polling while waiting), timing every round trip (a
//! clock read each) and printing percentiles: on a shared machine the low ones are the
//! round trips in which both threads had a core. `empty N` as third and fourth
//! arguments adds N polls that find nothing after the round trips (the cost of an empty
//! poll: the difference of two runs over the difference of their N). `write` as third
//! argument measures RDMA writes instead, in the pattern of `datperf lat --ops write`: each
//! end writes into the other's region with its completion suppressed, and the target polls
//! the last byte, driving `Ia::progress` between looks. `DATRS_SHM_PARAMS` adds IA
//! parameters (`", rdma_inline = 0"`: every RDMA by cross-memory attach); `DATRS_RTT_SEGS=k`
//! splits the source of each write into k local segments. `DATRS_RTT_CONTEND=1` with `two`
//! first makes the echo thread count as contended in the facade's pacing (it is preempted
//! while it polls, on CPU 0), then prints the yields, holds and releases of the round trips.

use std::time::{Duration, Instant};

use dat::EventData;
use dat::types::{CloseFlags, CompletionFlags, Cookie, DtoOp};

#[path = "../benches/pair/mod.rs"]
mod pair;
use pair::{End, pair_with};

/// Polls until a receive completion of `len` bytes; returns the number of empty polls.
fn recv(e: &End, len: u32) -> u64 {
    let mut empty = 0;
    loop {
        match e.dto.dequeue() {
            Ok(ev) => {
                let EventData::Dto(c) = ev.data else {
                    panic!("{ev:?}")
                };
                assert_eq!((c.operation, c.transferred_length), (DtoOp::Receive, len));
                return empty;
            }
            Err(_) => {
                empty += 1;
                // Under valgrind, which runs one thread at a time, a poll that finds the
                // provider thread holding the lock spins until it is scheduled: yield.
                if empty % 16 == 0 {
                    std::thread::yield_now();
                }
                std::hint::spin_loop();
            }
        }
    }
}

/// One RDMA write of `size` bytes from `from` into `to`'s region, the `n`th; returns the
/// empty polls of the target waiting for its last byte.
fn write_leg(from: &End, to: &End, size: u32, n: u64) -> u64 {
    let last = size as usize - 1;
    let want = (n % 251) as u8 + 1;
    from.lmr.write((1 << 19) + last, &[want]).unwrap();
    // `DATRS_RTT_SEGS=k`: the source in k local segments (the last one takes the rest).
    static SEGS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let k = (*SEGS.get_or_init(|| {
        std::env::var("DATRS_RTT_SEGS")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(1)
    }))
    .clamp(1, size);
    let part = size / k;
    let segs: Vec<_> = (0..k)
        .map(|i| {
            let len = if i + 1 == k { size - part * i } else { part };
            from.lmr.triplet((1 << 19) + u64::from(part * i), len)
        })
        .collect();
    from.ep
        .post_rdma_write(
            &segs,
            Cookie(2),
            to.lmr.rmr_triplet(0, size),
            CompletionFlags::SUPPRESS,
        )
        .unwrap();
    let mut empty = 0;
    let mut b = [0u8];
    loop {
        to.lmr.read(last, &mut b).unwrap();
        if b[0] == want {
            return empty;
        }
        if !to.ia.progress() {
            empty += 1;
            if empty % 16 == 0 {
                std::thread::yield_now();
            }
        }
    }
}

fn leg(from: &End, to: &End, size: u32) -> u64 {
    to.ep
        .post_recv(
            &[to.lmr.triplet(0, size)],
            Cookie(0),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    from.ep
        .post_send(
            &[from.lmr.triplet(1 << 19, size)],
            Cookie(1),
            CompletionFlags::SUPPRESS,
        )
        .unwrap();
    recv(to, size)
}

/// With `DATRS_SHM_COLOURS` set (and as root: frame numbers in `/proc/self/pagemap`): the L2
/// page colours of the connection's segment (1 MiB 16-way L2: 16 colours of 64 sets), as
/// `scripts/page_colours.py` counts them for fresh segments: how many frames follow their
/// predecessor, and the share of the slots' header lines (line 0 of every other page, with
/// 8 KiB slots) that fall into sets holding more than 16 of them.
#[allow(clippy::print_stderr)] // an example that reports what it measured
fn segment_colours() {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let Some((start, end)) = maps
        .lines()
        .find(|l| l.contains("memfd:datrs-shm"))
        .and_then(|l| {
            let (a, b) = l.split_whitespace().next()?.split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
    else {
        return;
    };
    let Ok(mut pm) = std::fs::File::open("/proc/self/pagemap") else {
        return;
    };
    let mut frames = Vec::new();
    for page in (start..end).step_by(4096) {
        let mut e = [0u8; 8];
        if pm.seek(SeekFrom::Start(page / 4096 * 8)).is_err() || pm.read_exact(&mut e).is_err() {
            return;
        }
        frames.push(u64::from_le_bytes(e) & ((1 << 55) - 1));
    }
    let pairs = frames.windows(2).filter(|w| w[1] == w[0] + 1).count();
    let slot_pages = (frames.len() - 2) / 2;
    let mut per_set = std::collections::HashMap::new();
    for ring in 0..2 {
        for j in 0..slot_pages / 2 {
            // (A page never touched has no frame.)
            let f = frames[2 + ring * slot_pages + 2 * j];
            if f != 0 {
                *per_set.entry(f % 16).or_insert(0u32) += 1;
            }
        }
    }
    let over: u32 = per_set.values().filter(|n| **n > 16).sum();
    eprintln!(
        "segment: {pairs}/{} consecutive frames, header lines in {} colours, {:.2} in overfull L2 sets",
        frames.len() - 1,
        per_set.len(),
        f64::from(over) / per_set.values().sum::<u32>().max(1) as f64
    );
}

/// Sets the calling thread's affinity to `cpus`.
fn pin(cpus: &[usize]) {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET only writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: as above.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: sets the calling thread's (0) affinity from the set built above.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

/// `DATRS_RTT_CONTEND`: makes the calling (echo) thread count as contended in the facade's
/// pacing, as a preemption at the start of a `datperf` chunk does: it polls its empty EVD
/// on CPU 0 while another thread computes there for 30 ms, then may run anywhere again. The
/// round trips that follow show whether it keeps yielding on every empty poll although its
/// peer runs on the other CPU (session 9).
fn made_contended(b: &End) {
    pin(&[0]);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(&[0]);
            let until = Instant::now() + Duration::from_millis(30);
            let mut x = 0u64;
            while Instant::now() < until {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
        while !done.load(std::sync::atomic::Ordering::Acquire) {
            assert!(b.dto.dequeue().is_err(), "nothing is on its way yet");
        }
    });
    // Every CPU the kernel has (it keeps those online): `available_parallelism` would read
    // the pinned mask.
    let all: Vec<usize> = (0..libc::CPU_SETSIZE as usize).collect();
    pin(&all);
}

#[allow(clippy::print_stderr)] // an example that reports what it measured
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let size: u32 = args.get(1).map_or(8, |s| s.parse().unwrap());
    let iters: u64 = args.get(2).map_or(100_000, |s| s.parse().unwrap());
    let two = args.get(3).is_some_and(|s| s == "two");
    let write = args.get(3).is_some_and(|s| s == "write");
    let empty_polls: u64 = match args.get(3).map(String::as_str) {
        Some("empty") => args.get(4).map_or(0, |s| s.parse().unwrap()),
        _ => 0,
    };
    let extra = std::env::var("DATRS_SHM_PARAMS").unwrap_or_default();
    let (a, b) = pair_with(8999, &extra);
    let t0 = Instant::now();
    let mut empty = 0;
    let mut rtts = Vec::with_capacity(if two { iters as usize } else { 0 });
    let contend = two && std::env::var_os("DATRS_RTT_CONTEND").is_some();
    let ready = std::sync::atomic::AtomicBool::new(!contend);
    let mut pace = (dat::pace_counts(), dat::pace_counts());
    if two {
        std::thread::scope(|s| {
            s.spawn(|| {
                if contend {
                    made_contended(&b);
                    ready.store(true, std::sync::atomic::Ordering::Release);
                }
                for _ in 0..iters {
                    recv(&b, size);
                    b.ep.post_recv(
                        &[b.lmr.triplet(0, size)],
                        Cookie(0),
                        CompletionFlags::DEFAULT,
                    )
                    .unwrap();
                    b.ep.post_send(
                        &[b.lmr.triplet(0, size)],
                        Cookie(1),
                        CompletionFlags::SUPPRESS,
                    )
                    .unwrap();
                }
            });
            b.ep.post_recv(
                &[b.lmr.triplet(0, size)],
                Cookie(0),
                CompletionFlags::DEFAULT,
            )
            .unwrap();
            while !ready.load(std::sync::atomic::Ordering::Acquire) {
                std::thread::yield_now();
            }
            pace.0 = dat::pace_counts();
            for _ in 0..iters {
                let t = Instant::now();
                a.ep.post_recv(
                    &[a.lmr.triplet(0, size)],
                    Cookie(0),
                    CompletionFlags::DEFAULT,
                )
                .unwrap();
                a.ep.post_send(
                    &[a.lmr.triplet(1 << 19, size)],
                    Cookie(1),
                    CompletionFlags::SUPPRESS,
                )
                .unwrap();
                empty += recv(&a, size);
                rtts.push(t.elapsed());
            }
            pace.1 = dat::pace_counts();
        });
    } else if write {
        for i in 0..iters {
            empty += write_leg(&a, &b, size, i);
            empty += write_leg(&b, &a, size, i);
        }
    } else {
        for _ in 0..iters {
            empty += leg(&a, &b, size);
            empty += leg(&b, &a, size);
        }
    }
    let el = t0.elapsed();
    for _ in 0..empty_polls {
        assert!(a.dto.dequeue().is_err(), "nothing is on its way");
    }
    eprintln!(
        "{size} B x {iters}: {:.3} us half round trip, {:.2} empty polls per round trip",
        el.as_secs_f64() * 1e6 / iters as f64 / 2.0,
        empty as f64 / iters as f64
    );
    if std::env::var_os("DATRS_SHM_COLOURS").is_some() {
        segment_colours();
    }
    if contend {
        let (p0, p1) = pace;
        eprintln!(
            "pacing over the round trips: {} yields, {} holds, {} releases",
            p1.yields - p0.yields,
            p1.holds - p0.holds,
            p1.releases - p0.releases
        );
    }
    if !rtts.is_empty() {
        // Percentiles of the half round trips: on a shared machine the low ones are those
        // in which both threads had a core, the mean is whatever the scheduler made of it.
        rtts.sort_unstable();
        let at = |q: f64| rtts[((rtts.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6 / 2.0;
        eprintln!(
            "half round trip percentiles (us): p10 {:.3}, p25 {:.3}, p50 {:.3}, p90 {:.3}",
            at(0.10),
            at(0.25),
            at(0.50),
            at(0.90)
        );
    }
    let _ = a.ia.close(CloseFlags::Abrupt);
    let _ = b.ia.close(CloseFlags::Abrupt);
    std::thread::sleep(Duration::from_millis(1));
}
