//! Criterion benches of [`dat_core::flag_lock::FlagLock`]: one uncontended take and release,
//! the pass every post and completion of the verbs provider makes (twice per polled round
//! trip end) and every look of the shm provider's pollers.

use std::hint::black_box;

use criterion::Criterion;
use dat_core::flag_lock::FlagLock;

fn uncontended(c: &mut Criterion) {
    let l = FlagLock::new(0u64);
    let mut g = c.benchmark_group("flag_lock");
    g.bench_function("lock_release", |b| {
        b.iter(|| {
            let mut v = black_box(&l).lock();
            *v += 1;
        })
    });
    g.bench_function("try_lock_release", |b| {
        b.iter(|| {
            if let Some(mut v) = black_box(&l).try_lock() {
                *v += 1;
            }
        })
    });
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    uncontended(&mut c);
    c.final_summary();
}
