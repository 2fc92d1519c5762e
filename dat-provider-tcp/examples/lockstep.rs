//! Counts, not times: an 8-byte ping-pong in lock step on one thread, through the `dat`
//! facade over a real loopback connection (`dat`) or over raw TCP sockets (`raw`), so that
//! load-independent costs per round trip can be counted and compared:
//!
//! ```sh
//! cargo build --release -p dat-provider-tcp --example lockstep
//! L=target/release/examples/lockstep
//! $L dat 100000                      # allocations per round trip (counting allocator)
//! $L idle 100000                     # one empty poll (`Evd::dequeue` finding nothing)
//! $L write 100000                    # the same ping-pong as RDMA writes (no receive, no event)
//! strace -c -f $L dat 20000          # system calls per round trip (minus the setup)
//! valgrind --tool=callgrind $L dat 20000   # instructions per round trip (also `raw`)
//! ```
//!
//! One thread plays both ends: A posts a receive and a send, B dequeues until the message
//! arrives (loopback delivers it within A's `writev`), posts a receive and the reply, and A
//! dequeues until the reply arrives. Busy-polling adds failed reads while the peer's thread
//! is elsewhere; lock step leaves only the work every message needs.

// A measuring tool: its output is the point.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[path = "../benches/pair/mod.rs"]
mod pair;

use dat::types::{CompletionFlags, Cookie, DtoOp};
use dat::{Evd, Event, EventData};

/// Counts allocations (and reallocations) made by any thread.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call unchanged to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "dat".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    match mode.as_str() {
        "dat" => dat_lockstep(n, false),
        "idle" => dat_lockstep(n, true),
        "write" => write_lockstep(n),
        "raw" => raw_lockstep(n),
        _ => eprintln!("usage: lockstep [dat|idle|write|raw] [round trips or polls]"),
    }
}

fn report(what: &str, n: u64, start: Instant, allocs: u64) {
    let us = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!(
        "{what}: {n} times, {us:.2} us each (one thread, both ends), {:.3} allocations each",
        allocs as f64 / n as f64
    );
}

fn until_receive(evd: &Evd) {
    loop {
        if let Ok(Event {
            data: EventData::Dto(c),
            ..
        }) = evd.dequeue()
            && c.operation == DtoOp::Receive
        {
            assert_eq!(c.transferred_length, 8);
            return;
        }
    }
}

/// `idle`: instead of round trips, `n` polls of an EVD on a connection with nothing arriving
/// (the cost of one look of a busy-polling thread, minus the `recv` that finds nothing).
fn dat_lockstep(n: u64, idle: bool) {
    let (_reg, a, b) = pair::connected();
    let round = || {
        a.5.post_recv(&[a.6.triplet(0, 8)], Cookie(0), CompletionFlags::DEFAULT)
            .unwrap();
        a.5.post_send(&[a.6.triplet(8, 8)], Cookie(1), CompletionFlags::SUPPRESS)
            .unwrap();
        until_receive(&b.2);
        b.5.post_recv(&[b.6.triplet(0, 8)], Cookie(0), CompletionFlags::DEFAULT)
            .unwrap();
        b.5.post_send(&[b.6.triplet(8, 8)], Cookie(1), CompletionFlags::SUPPRESS)
            .unwrap();
        until_receive(&a.2);
    };
    b.5.post_recv(&[b.6.triplet(0, 8)], Cookie(0), CompletionFlags::DEFAULT)
        .unwrap();
    // Warm up (first-use allocations, the driver stepping back), then count.
    for _ in 0..1000 {
        round();
    }
    if idle {
        let before = ALLOCS.load(Ordering::Relaxed);
        let start = Instant::now();
        for _ in 0..n {
            assert!(a.2.dequeue().is_err(), "nothing was sent");
        }
        report(
            "idle polls",
            n,
            start,
            ALLOCS.load(Ordering::Relaxed) - before,
        );
        return;
    }
    let before = ALLOCS.load(Ordering::Relaxed);
    let start = Instant::now();
    for _ in 0..n {
        round();
    }
    report(
        "dat round trips",
        n,
        start,
        ALLOCS.load(Ordering::Relaxed) - before,
    );
}

/// `write`: the lock-step ping-pong as RDMA writes polled in memory (as `datperf`'s RDMA-write
/// ping-pong does): no receive posted, no completion delivered, no EVD polled; the difference
/// to `dat` is what a send/recv message costs beyond moving the bytes.
fn write_lockstep(n: u64) {
    let (_reg, a, b) = pair::connected();
    // `from` writes its bytes 8..16 to `to`'s bytes 0..8; `to` polls the last of them.
    let write = |from: &pair::End, at: u64, to: &pair::End, seq: u8| {
        from.5
            .post_rdma_write(
                &[from.6.triplet(at, 8)],
                Cookie(1),
                to.6.rmr_triplet(0, 8),
                CompletionFlags::SUPPRESS,
            )
            .unwrap();
        until_byte(to, seq);
    };
    let mut seq = 0u8;
    let round = || {
        seq = seq.wrapping_add(1).max(1);
        a.6.write(8, &[seq; 8]).unwrap();
        write(&a, 8, &b, seq);
        // B echoes what it received.
        write(&b, 0, &a, seq);
    };
    rounds("write round trips", n, round);
}

/// Drives progress on `end`'s IA until the last byte of its LMR's first 8 is `want`.
fn until_byte(end: &pair::End, want: u8) {
    let mut b = [0u8; 1];
    loop {
        end.6.read(7, &mut b).unwrap();
        if b[0] == want {
            return;
        }
        end.0.progress();
    }
}

fn raw_lockstep(n: u64) {
    fn recv8(s: &mut TcpStream) {
        let mut buf = [0u8; 8];
        let mut got = 0;
        while got < 8 {
            match s.read(&mut buf[got..]) {
                Ok(0) => panic!("peer closed"),
                Ok(k) => got += k,
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::hint::spin_loop(),
                Err(e) => panic!("read: {e}"),
            }
        }
    }
    let (mut a, mut b) = pair::raw_pair();
    let msg = [7u8; 8];
    let round = || {
        a.write_all(&msg).unwrap();
        recv8(&mut b);
        b.write_all(&msg).unwrap();
        recv8(&mut a);
    };
    rounds("raw round trips", n, round);
}

/// Warms up with 1 000 rounds, then runs and reports `n`.
fn rounds(what: &str, n: u64, mut round: impl FnMut()) {
    for _ in 0..1000 {
        round();
    }
    let before = ALLOCS.load(Ordering::Relaxed);
    let start = Instant::now();
    for _ in 0..n {
        round();
    }
    report(what, n, start, ALLOCS.load(Ordering::Relaxed) - before);
}
