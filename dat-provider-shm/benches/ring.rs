//! Criterion benches of the shm provider: the bare ring, and the post path through the `dat`
//! facade (one process, two IAs; the echo side runs on its own thread, so a round trip crosses
//! cores as it would between processes).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use dat::types::{
    CloseFlags, CompletionFlags, ConnQual, Cookie, DtoStatus, EvdFlags, LOOPBACK_ADDRESS, PspFlags,
    Qos,
};
use dat::{ConnectFlags, Evd, EventData};
use dat_provider_shm::ring::{self, Rec, Segment};

mod pair;
use pair::{W, end, pair, registry};

fn ring_only(c: &mut Criterion) {
    let seg = Segment::anonymous(64, 8192).unwrap();
    let (mut tx, _) = ring::ends(&seg, true);
    let (_, mut rx) = ring::ends(&seg, false);
    let mut g = c.benchmark_group("ring");
    for size in [8usize, 4096] {
        let src = vec![7u8; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(format!("push_pop_{size}B"), |b| {
            let mut dst = vec![0u8; size];
            b.iter(|| {
                tx.push(
                    Rec {
                        kind: 1,
                        len: size as u32,
                        ..Rec::default()
                    },
                    |p, n| {
                        // SAFETY: the slot payload has `n` writable bytes, `src` as many.
                        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p, n) };
                    },
                );
                if let Ok(Some(inc)) = rx.peek() {
                    // SAFETY: the record carries `len` payload bytes inside its slot.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            inc.payload,
                            dst.as_mut_ptr(),
                            inc.rec.len as usize,
                        )
                    };
                    rx.release();
                }
            })
        });
    }
    g.finish();
}

/// Polls `evd` (dequeue drives progress) until a completion arrives: spin, then yield, so
/// two pollers sharing a core hand it over instead of burning their time slices.
fn poll(evd: &Evd) -> DtoStatus {
    let mut spins = 0u32;
    loop {
        if let Ok(e) = evd.dequeue()
            && let EventData::Dto(c) = e.data
        {
            return c.status;
        }
        spins += 1;
        if spins > 32 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

fn post_path(c: &mut Criterion) {
    let none = CompletionFlags::empty();
    let mut g = c.benchmark_group("post");
    g.measurement_time(Duration::from_secs(3));
    for size in [8u32, 4096] {
        let (a, b) = pair(9000 + u64::from(size));
        let b = Arc::new(b);
        let stop = Arc::new(AtomicBool::new(false));
        // Echo thread: every message received is sent back, and its buffer reposted.
        for i in 0..64 {
            b.ep.post_recv(&[b.lmr.triplet(i * 4096, 4096)], Cookie(i), none)
                .unwrap();
        }
        let (b2, stop2) = (b.clone(), stop.clone());
        let echo = std::thread::spawn(move || {
            while !stop2.load(Ordering::Acquire) {
                let Ok(e) = b2.dto.dequeue() else {
                    std::thread::yield_now();
                    continue;
                };
                let EventData::Dto(c) = e.data else { continue };
                if c.operation == dat::types::DtoOp::Receive && c.status == DtoStatus::Success {
                    let t = b2.lmr.triplet(c.cookie.0 * 4096, c.transferred_length);
                    let _ = b2.ep.post_send(&[t], Cookie(1 << 40), none);
                    let _ =
                        b2.ep
                            .post_recv(&[b2.lmr.triplet(c.cookie.0 * 4096, 4096)], c.cookie, none);
                }
            }
        });
        g.throughput(Throughput::Bytes(u64::from(size)));
        g.bench_function(format!("pingpong_half_rtt_{size}B"), |bch| {
            bch.iter_custom(|iters| {
                let t0 = Instant::now();
                for i in 0..iters {
                    // Rotate buffers, as an application streaming messages would.
                    let at = (i % 64) * 4096;
                    a.ep.post_recv(&[a.lmr.triplet(at, 4096)], Cookie(i), none)
                        .unwrap();
                    a.ep.post_send(&[a.lmr.triplet((1 << 20) + at, size)], Cookie(i), none)
                        .unwrap();
                    // Send completion and the echo, in either order.
                    poll(&a.dto);
                    poll(&a.dto);
                }
                t0.elapsed() / 2
            })
        });
        stop.store(true, Ordering::Release);
        echo.join().unwrap();
        let _ = a.ia.close(CloseFlags::Abrupt);
        let _ = b.ia.close(CloseFlags::Abrupt);
    }
    g.finish();
}

fn rdma(c: &mut Criterion) {
    let (a, b) = pair(9999);
    let none = CompletionFlags::empty();
    let remote = b.lmr.rmr_triplet(0, 1 << 20);
    let mut g = c.benchmark_group("rdma");
    g.throughput(Throughput::Bytes(1 << 20));
    g.bench_function("write_1MiB", |bch| {
        bch.iter(|| {
            a.ep.post_rdma_write(&[a.lmr.triplet(0, 1 << 20)], Cookie(1), remote, none)
                .unwrap();
            assert_eq!(poll(&a.dto), DtoStatus::Success);
        })
    });
    g.bench_function("read_1MiB", |bch| {
        bch.iter(|| {
            a.ep.post_rdma_read(&[a.lmr.triplet(0, 1 << 20)], Cookie(1), remote, none)
                .unwrap();
            assert_eq!(poll(&a.dto), DtoStatus::Success);
        })
    });
    g.finish();
    let _ = a.ia.close(CloseFlags::Abrupt);
    let _ = b.ia.close(CloseFlags::Abrupt);
}

const ECHO_ENV: &str = "DATRS_SHM_BENCH_ECHO";

/// The echo process of the two-process benches: accepts one connection on the qualifier in
/// `$DATRS_SHM_BENCH_ECHO`, returns every message, and serves RDMA on its 4 MiB region
/// (advertised in the accept's private data) until the requester disconnects.
fn echo_process(qual: u64) {
    let (b, bc) = end(&registry());
    let cr_evd = b.ia.create_evd(4, EvdFlags::CR, None).unwrap();
    let _sp =
        b.ia.create_psp(ConnQual(qual), &cr_evd, PspFlags::Consumer)
            .unwrap();
    let EventData::ConnectionRequest { cr, .. } = cr_evd.wait(W, 1).unwrap().0.data else {
        return;
    };
    let none = CompletionFlags::empty();
    for i in 0..64 {
        b.ep.post_recv(&[b.lmr.triplet(i * 4096, 4096)], Cookie(i), none)
            .unwrap();
    }
    let t = b.lmr.rmr_triplet(0, 4 << 20);
    let mut pd = t.rmr_context.to_le_bytes().to_vec();
    pd.extend_from_slice(&t.virtual_address.to_le_bytes());
    b.ia.cr(cr).unwrap().accept(Some(&b.ep), &pd).unwrap();
    bc.wait(W, 1).unwrap();
    let mut spins = 0u32;
    loop {
        let Ok(e) = b.dto.dequeue() else {
            spins += 1;
            if spins.is_multiple_of(1024) && bc.dequeue().is_ok() {
                break; // disconnected
            }
            if spins > 32 {
                std::thread::yield_now();
            }
            continue;
        };
        spins = 0;
        let EventData::Dto(c) = e.data else { continue };
        if c.operation == dat::types::DtoOp::Receive && c.status == DtoStatus::Success {
            let t = b.lmr.triplet(c.cookie.0 * 4096, c.transferred_length);
            let _ = b.ep.post_send(&[t], Cookie(1 << 40), none);
            let _ =
                b.ep.post_recv(&[b.lmr.triplet(c.cookie.0 * 4096, 4096)], c.cookie, none);
        } else if c.status == DtoStatus::Flushed {
            break;
        }
    }
    let _ = b.ia.close(CloseFlags::Abrupt);
}

/// Ping-pong and RDMA between two processes (the bench binary runs itself as the echo).
fn two_process(c: &mut Criterion) {
    let qual = 20_000 + u64::from(std::process::id() % 10_000);
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new(exe)
        .env(ECHO_ENV, qual.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (a, ac) = end(&registry());
    let none = CompletionFlags::empty();
    let mut pd = Vec::new();
    for _ in 0..1000 {
        a.ep.connect(
            LOOPBACK_ADDRESS,
            ConnQual(qual),
            W,
            &[],
            Qos::BestEffort,
            ConnectFlags::Default,
        )
        .unwrap();
        let e = ac.wait(W, 1).unwrap().0;
        if let EventData::Connection { private_data, .. } = e.data
            && e.number == dat::types::EventNumber::Established
        {
            pd = private_data.into_vec();
            break;
        }
        a.ep.reset().unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(pd.len(), 12, "the echo process accepted");
    let remote = dat::types::RmrTriplet {
        rmr_context: u32::from_le_bytes(pd[0..4].try_into().unwrap()),
        virtual_address: u64::from_le_bytes(pd[4..12].try_into().unwrap()),
        segment_length: 1 << 20,
    };
    let mut g = c.benchmark_group("two_process");
    g.measurement_time(Duration::from_secs(3));
    for size in [8u32, 4096] {
        g.throughput(Throughput::Bytes(u64::from(size)));
        g.bench_function(format!("pingpong_half_rtt_{size}B"), |bch| {
            bch.iter_custom(|iters| {
                let t0 = Instant::now();
                for i in 0..iters {
                    let at = (i % 64) * 4096;
                    a.ep.post_recv(&[a.lmr.triplet(at, 4096)], Cookie(i), none)
                        .unwrap();
                    a.ep.post_send(&[a.lmr.triplet((1 << 20) + at, size)], Cookie(i), none)
                        .unwrap();
                    poll(&a.dto);
                    poll(&a.dto);
                }
                t0.elapsed() / 2
            })
        });
    }
    g.throughput(Throughput::Bytes(1 << 20));
    g.bench_function("rdma_write_1MiB", |bch| {
        bch.iter(|| {
            a.ep.post_rdma_write(&[a.lmr.triplet(0, 1 << 20)], Cookie(1), remote, none)
                .unwrap();
            assert_eq!(poll(&a.dto), DtoStatus::Success);
        })
    });
    g.bench_function("rdma_read_1MiB", |bch| {
        bch.iter(|| {
            a.ep.post_rdma_read(&[a.lmr.triplet(0, 1 << 20)], Cookie(1), remote, none)
                .unwrap();
            assert_eq!(poll(&a.dto), DtoStatus::Success);
        })
    });
    g.finish();
    let _ = a.ep.disconnect(CloseFlags::Graceful);
    let _ = a.ia.close(CloseFlags::Abrupt);
    for _ in 0..500 {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The bench group (criterion's macro generates undocumented items).
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(
        benches,
        super::ring_only,
        super::post_path,
        super::rdma,
        super::two_process
    );
}

fn main() {
    if let Some(q) = std::env::var(ECHO_ENV).ok().and_then(|q| q.parse().ok()) {
        echo_process(q);
        return;
    }
    group::benches();
    Criterion::default().configure_from_args().final_summary();
}
