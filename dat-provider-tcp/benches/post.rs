//! The post path: an 8-byte send through two engines in memory (post, frame generation,
//! execution at the target, acknowledgement, completion), and the same through the `dat`
//! facade over a real loopback connection (ping-pong, completions polled).

// `criterion_group!` generates undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use dat::EventData;
use dat::types::{CompletionFlags, Cookie, MemPriv, Timeout, VaType};
use dat_core::mem::{Buffer, MemTable, SegList};
use dat_core::provider::{PostOp, WorkRequest};
use dat_core::types::{LmrId, LmrTriplet, PzId};
use dat_provider_tcp::engine::{Engine, EngineConfig};

mod pair;

fn engine_pair(c: &mut Criterion) {
    let mem = Arc::new(RwLock::new(MemTable::new()));
    let region = mem
        .write()
        .unwrap()
        .register(
            LmrId(1),
            PzId(1),
            Arc::new(Buffer::from_vec(vec![0; 64])),
            MemPriv::ALL,
            VaType::Va,
        )
        .unwrap();
    let seg = |off: u64| -> SegList {
        let t = LmrTriplet {
            lmr_context: region.lmr_context,
            virtual_address: region.start + off,
            segment_length: 8,
        };
        std::iter::once(
            mem.read()
                .unwrap()
                .local(PzId(1), &t, MemPriv::LOCAL_READ)
                .unwrap(),
        )
        .collect()
    };
    let cfg = EngineConfig {
        mem: mem.clone(),
        pz: Some(PzId(1)),
        srq: None,
        rnr_timeout: std::time::Duration::from_secs(1),
        connect_retry: std::time::Duration::ZERO,
    };
    let (mut a, mut b) = (Engine::new(cfg.clone()), Engine::new(cfg));
    let now = Instant::now();
    a.connect(now, 1, &[], None);
    let pipe = |from: &mut Engine, to: &mut Engine| {
        let out = from.poll_transmit().to_vec();
        from.advance_transmit(out.len());
        to.handle_input(now, &out);
    };
    let req = a.poll_transmit().to_vec();
    a.advance_transmit(req.len());
    b.accept(std::time::Duration::from_secs(1), &[]);
    pipe(&mut b, &mut a);
    pipe(&mut a, &mut b);
    while a.poll_event().is_some() || b.poll_event().is_some() {}
    let send_segs = seg(0);
    let recv_segs = seg(8);
    let mut buf = Vec::with_capacity(4096);
    c.bench_function("engine send+recv+ack 8B", |bch| {
        bch.iter(|| {
            b.post(WorkRequest {
                op: PostOp::Recv,
                segs: recv_segs.clone(),
                cookie: Cookie(1),
                flags: CompletionFlags::DEFAULT,
            });
            a.post(WorkRequest {
                op: PostOp::Send,
                segs: send_segs.clone(),
                cookie: Cookie(2),
                flags: CompletionFlags::DEFAULT,
            });
            buf.clear();
            buf.extend_from_slice(a.poll_transmit());
            a.advance_transmit(buf.len());
            b.handle_input(now, &buf);
            buf.clear();
            buf.extend_from_slice(b.poll_transmit());
            b.advance_transmit(buf.len());
            a.handle_input(now, &buf);
            black_box((a.poll_event(), b.poll_event()))
        })
    });
}

fn loopback_polled(c: &mut Criterion) {
    loopback_pingpong(c, false);
}

fn loopback_waited(c: &mut Criterion) {
    loopback_pingpong(c, true);
}

fn loopback_pingpong(c: &mut Criterion, use_wait: bool) {
    let (_reg, a, b) = pair::connected();
    let b_target = b.1.alloc(1 << 20, MemPriv::ALL).unwrap();
    let t = Timeout::from_duration(pair::SETUP_WAIT);
    // B echoes every message on a thread that polls its EVD.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    b.5.post_recv(&[b.6.triplet(0, 8)], Cookie(0), CompletionFlags::DEFAULT)
        .unwrap();
    let echo = std::thread::spawn(move || {
        let (_ia, _pz, dto, _c, _cr, ep, lmr) = b;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            let got = if use_wait {
                dto.wait(Timeout(1000), 1).map(|(ev, _)| ev)
            } else {
                dto.dequeue()
            };
            let Ok(ev) = got else { continue };
            if let EventData::Dto(c) = ev.data
                && c.operation == dat::types::DtoOp::Receive
            {
                ep.post_recv(&[lmr.triplet(0, 8)], Cookie(0), CompletionFlags::DEFAULT)
                    .unwrap();
                ep.post_send(&[lmr.triplet(8, 8)], Cookie(1), CompletionFlags::SUPPRESS)
                    .unwrap();
            }
        }
    });
    let name = if use_wait {
        "loopback 8B ping-pong (dat_evd_wait, round trip)"
    } else {
        "loopback 8B ping-pong (polled, round trip)"
    };
    c.bench_function(name, |bch| {
        bch.iter(|| {
            a.5.post_recv(&[a.6.triplet(0, 8)], Cookie(0), CompletionFlags::DEFAULT).unwrap();
            a.5.post_send(&[a.6.triplet(8, 8)], Cookie(1), CompletionFlags::SUPPRESS).unwrap();
            loop {
                let got = if use_wait {
                    a.2.wait(t, 1).map(|(ev, _)| ev)
                } else {
                    a.2.dequeue()
                };
                if let Ok(ev) = got
                    && matches!(ev.data, EventData::Dto(c) if c.operation == dat::types::DtoOp::Receive)
                {
                    break;
                }
            }
        })
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    echo.join().unwrap();
    if use_wait {
        return;
    }
    // 1 MiB RDMA writes, eight in flight, completions polled.
    let src = a.1.alloc(1 << 20, MemPriv::ALL).unwrap();
    let mut g = c.benchmark_group("stream");
    g.throughput(criterion::Throughput::Bytes(1 << 20));
    let remote = b_target.rmr_triplet(0, 1 << 20);
    let mut inflight = 0u32;
    let mut cookie = 0u64;
    g.bench_function("loopback 1MiB rdma write", |bch| {
        bch.iter(|| {
            while inflight < 8 {
                a.5.post_rdma_write(
                    &[src.triplet(0, 1 << 20)],
                    Cookie(cookie),
                    remote,
                    CompletionFlags::DEFAULT,
                )
                .unwrap();
                cookie += 1;
                inflight += 1;
            }
            loop {
                if a.2.dequeue().is_ok() {
                    inflight -= 1;
                    break;
                }
            }
        })
    });
    g.finish();
}

/// The baseline of the polled ping-pong: 8 bytes over a raw loopback TCP connection with
/// `TCP_NODELAY`, both ends spinning on non-blocking sockets (busy-poll), echoed by a thread.
fn raw_tcp_spin(c: &mut Criterion) {
    use std::io::{ErrorKind, Read, Write};
    use std::net::TcpStream;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn exchange(s: &mut TcpStream, buf: &mut [u8; 8], stop: Option<&AtomicBool>) -> bool {
        let mut got = 0;
        while got < buf.len() {
            match s.read(&mut buf[got..]) {
                Ok(0) => return false,
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if stop.is_some_and(|f| f.load(Ordering::Relaxed)) {
                        return false;
                    }
                    std::hint::spin_loop();
                }
                Err(e) => panic!("read: {e}"),
            }
        }
        true
    }
    fn send(s: &mut TcpStream, buf: &[u8; 8]) {
        let mut put = 0;
        while put < buf.len() {
            match s.write(&buf[put..]) {
                Ok(n) => put += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::hint::spin_loop(),
                Err(e) => panic!("write: {e}"),
            }
        }
    }

    let (mut a, mut b) = pair::raw_pair();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 8];
        while exchange(&mut b, &mut buf, Some(&stop2)) {
            send(&mut b, &buf);
        }
    });
    let mut buf = [7u8; 8];
    c.bench_function("raw tcp 8B ping-pong (busy-poll, round trip)", |bch| {
        bch.iter(|| {
            send(&mut a, &buf);
            exchange(&mut a, &mut buf, None);
            black_box(&buf);
        })
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    echo.join().unwrap();
}

criterion_group!(
    benches,
    engine_pair,
    raw_tcp_spin,
    loopback_polled,
    loopback_waited
);
criterion_main!(benches);
