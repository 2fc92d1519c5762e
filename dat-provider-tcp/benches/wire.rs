//! Frame encode/decode cost.

// `criterion_group!` generates undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dat_provider_tcp::wire::{DataHeader, FIRST, Frame, LAST};

fn wire(c: &mut Criterion) {
    let mut g = c.benchmark_group("wire");
    let payload = [7u8; 8];
    let mut out = Vec::with_capacity(1 << 16);
    g.throughput(Throughput::Elements(1));
    g.bench_function("encode send 8B", |b| {
        b.iter(|| {
            out.clear();
            DataHeader::Send { msn: 1, total: 8 }.emit(FIRST | LAST, 8, 3, &mut out);
            out.extend_from_slice(black_box(&payload));
            black_box(out.len())
        })
    });
    let mut frame = Vec::new();
    Frame::Send {
        msn: 1,
        total: 8,
        flags: FIRST | LAST,
        payload: &payload,
    }
    .emit(3, &mut frame);
    g.bench_function("decode send 8B", |b| {
        b.iter(|| black_box(Frame::parse(black_box(&frame))))
    });
    let big = vec![1u8; 64 * 1024];
    let mut bigframe = Vec::new();
    Frame::RdmaWrite {
        msn: 1,
        total: 1 << 20,
        rkey: 5,
        addr: 4096,
        flags: FIRST,
        payload: &big,
    }
    .emit(0, &mut bigframe);
    g.throughput(Throughput::Bytes(bigframe.len() as u64));
    g.bench_function("decode rdma write 64KiB piece", |b| {
        b.iter(|| black_box(Frame::parse(black_box(&bigframe))))
    });
    g.finish();
}

criterion_group!(benches, wire);
criterion_main!(benches);
