//! memcpy bandwidth: one thread copying one buffer into another, cache-hot for small sizes.

use std::time::{Duration, Instant};

use crate::baseline::{BASELINE, series};
use crate::client::chunked;
use crate::error::PerfResult;
use crate::record::{Metric, Op, Record};

/// Copies `size` bytes up to `count` times (fewer when `budget` runs out).
///
/// # Errors
/// None in practice (the signature matches the other baselines).
pub fn copy(size: u64, count: u64, budget: Duration) -> PerfResult<Record> {
    let n = usize::try_from(size).unwrap_or(usize::MAX).max(1);
    let src = vec![0x5au8; n];
    let mut dst = vec![0u8; n];
    let (done, elapsed) = chunked(count, budget, |k| {
        let start = Instant::now();
        for _ in 0..k {
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&mut dst);
        }
        Ok(start.elapsed())
    })?;
    let value = done as f64 * size as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6;
    Ok(Record::new(
        series::MEMCPY,
        BASELINE,
        Op::Copy,
        Metric::Bandwidth,
        size,
        done,
        value,
        "poll",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_reports_bandwidth() {
        let r = copy(4096, 100, Duration::from_millis(5)).unwrap();
        assert_eq!(
            (r.series.as_str(), r.op, r.metric),
            ("memcpy", Op::Copy, Metric::Bandwidth)
        );
        assert!(r.iters >= 1 && r.iters <= 100);
        assert!(r.value > 0.0);
    }
}
