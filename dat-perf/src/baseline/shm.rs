//! A raw two-process shared-memory ping-pong: an anonymous `MAP_SHARED` mapping made before
//! `fork`, each side copying the payload in, release-storing a sequence flag, spinning
//! (acquire loads) on the peer's flag and copying the payload out: two copies per hop, like
//! an eager/inject path.
//!
//! The child only spins, copies and exits: it never allocates, locks or unwinds (it runs
//! after `fork` of a possibly multithreaded process). Both sides yield the CPU every few
//! thousand spins, so two pollers sharing one core still progress, and both give up after
//! the timeout (the child also when its parent is gone).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::baseline::{BASELINE, series};
use crate::client::chunked;
use crate::error::{PerfError, PerfResult};
use crate::record::{Metric, Op, Record};

const PING: usize = 0;
const PONG: usize = 64;
const STOP: usize = 128;
const DATA: usize = 4096;
const YIELD_EVERY: u32 = 4096;
const WARM_UP: Duration = Duration::from_millis(20);

/// The shared mapping.
struct Shared {
    base: NonNull<u8>,
    len: usize,
    size: usize,
}

impl Shared {
    fn new(size: usize) -> PerfResult<Shared> {
        let len = DATA + 2 * size.div_ceil(4096) * 4096;
        // SAFETY: a fresh anonymous shared mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(PerfError::io("mmap", std::io::Error::last_os_error()));
        }
        let base = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| PerfError::io("mmap", std::io::Error::other("null mapping")))?;
        Ok(Shared { base, len, size })
    }

    fn flag(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is 0, 64 or 128, inside the first page of the mapping, 8-aligned (the
        // mapping is page-aligned); the zero-filled page is a valid AtomicU64 and only ever
        // accessed atomically, by both processes.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU64>() }
    }

    /// Region 0 (client to server) or 1 (server to client).
    fn region(&self, which: usize) -> *mut u8 {
        // SAFETY: DATA + which * size_rounded + size <= len by construction in `new`.
        unsafe {
            self.base
                .as_ptr()
                .add(DATA + which * self.size.div_ceil(4096) * 4096)
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made; no reference into it outlives self.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// Spins until `flag` holds `want`; false when `stop` is raised or `deadline` passes, or
/// when `parent` is given and this process is orphaned.
fn spin_until(
    flag: &AtomicU64,
    want: u64,
    stop: &AtomicU64,
    deadline: Instant,
    parent: Option<libc::pid_t>,
) -> bool {
    let mut spins = 0u32;
    loop {
        if flag.load(Ordering::Acquire) == want {
            return true;
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(YIELD_EVERY) {
            if stop.load(Ordering::Acquire) != 0 || Instant::now() >= deadline {
                return false;
            }
            // SAFETY: getppid and sched_yield have no preconditions and are async-signal-safe.
            if parent.is_some_and(|p| unsafe { libc::getppid() } != p) {
                return false;
            }
            // SAFETY: as above.
            unsafe {
                libc::sched_yield();
            }
        }
        std::hint::spin_loop();
    }
}

/// The child: echo until told to stop. Only atomics, copies and `_exit`.
fn child(sh: &Shared, scratch: *mut u8, deadline: Instant, parent: libc::pid_t) -> ! {
    let mut seq = 1u64;
    let stop = sh.flag(STOP);
    while spin_until(sh.flag(PING), seq, stop, deadline, Some(parent)) {
        // SAFETY: region 0 is the parent's to write only until it stores PING = seq, and it
        // waits for PONG = seq before writing again; scratch is this process's private copy
        // of a `size`-byte buffer allocated before the fork; regions and scratch are disjoint.
        unsafe {
            std::ptr::copy_nonoverlapping(sh.region(0), scratch, sh.size);
            std::ptr::copy_nonoverlapping(scratch, sh.region(1), sh.size);
        }
        sh.flag(PONG).store(seq, Ordering::Release);
        seq += 1;
    }
    // SAFETY: ends the child at once, without running the parent's atexit handlers or
    // destructors.
    unsafe { libc::_exit(0) }
}

/// Ping-pong of `size` bytes between this process and a forked child: up to `iters` round
/// trips (fewer when `budget` runs out).
///
/// # Errors
/// [`PerfError::Io`] when the mapping or the fork fails; [`PerfError::Timeout`] when the
/// child stops answering within `timeout`.
pub fn pingpong(size: u64, iters: u64, budget: Duration, timeout: Duration) -> PerfResult<Record> {
    let n = usize::try_from(size).unwrap_or(usize::MAX).max(1);
    let sh = Shared::new(n)?;
    let mut scratch = vec![0u8; n];
    let mut out = vec![0u8; n];
    let src = vec![0x5au8; n];
    // The child's hard limit: the whole run plus slack.
    let child_deadline = Instant::now() + timeout + budget * 4 + Duration::from_secs(5);
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let scratch_ptr = scratch.as_mut_ptr();
    // SAFETY: fork; the child runs only `child`, which allocates nothing, takes no locks and
    // leaves with `_exit`, so the state other threads held at the fork is never touched.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(PerfError::io("fork", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        child(&sh, scratch_ptr, child_deadline, parent);
    }
    let stop = sh.flag(STOP);
    let mut seq = 0u64;
    let mut round_trips = |k: u64| -> PerfResult<Duration> {
        let start = Instant::now();
        for _ in 0..k {
            seq += 1;
            // SAFETY: region 0 is ours to write until we store PING = seq (the child has
            // stored PONG = seq - 1, so it finished reading it); src holds n bytes.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), sh.region(0), n) };
            sh.flag(PING).store(seq, Ordering::Release);
            if !spin_until(sh.flag(PONG), seq, stop, Instant::now() + timeout, None) {
                return Err(PerfError::Timeout(
                    "the shared-memory child stopped answering".into(),
                ));
            }
            // SAFETY: the child wrote region 1 before storing PONG = seq (acquired above) and
            // does not touch it again before our next PING; out holds n bytes.
            unsafe { std::ptr::copy_nonoverlapping(sh.region(1), out.as_mut_ptr(), n) };
        }
        Ok(start.elapsed())
    };
    // The child starts on this CPU; until the scheduler moves it, every round trip costs
    // context switches. Warm up for a fixed time (not a fixed count) so that is over.
    let warm = Instant::now();
    let mut result = Ok((0, Duration::ZERO));
    while warm.elapsed() < WARM_UP.min(budget) {
        if let Err(e) = round_trips(10) {
            result = Err(e);
            break;
        }
    }
    if result.is_ok() {
        result = chunked(iters, budget, &mut round_trips);
    }
    stop.store(1, Ordering::Release);
    reap(pid);
    drop(scratch);
    let (done, elapsed) = result?;
    let value = elapsed.as_secs_f64() * 1e6 / done as f64 / 2.0;
    Ok(Record::new(
        series::SHM_SPIN,
        BASELINE,
        Op::PingPong,
        Metric::Latency,
        size,
        done,
        value,
        "poll",
    ))
}

/// Waits for the child (it sees STOP within a few thousand spins), killing it after 2 s.
fn reap(pid: libc::pid_t) {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child without blocking; status is a valid out pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r != 0 {
            return;
        }
        if Instant::now() >= deadline {
            // SAFETY: signals and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pingpong_between_two_processes() {
        for size in [1, 4096, 1 << 20] {
            let r = pingpong(size, 50, Duration::from_millis(20), Duration::from_secs(10)).unwrap();
            assert_eq!(
                (r.series.as_str(), r.op, r.metric, r.size),
                ("raw-shm-spin", Op::PingPong, Metric::Latency, size)
            );
            assert!(r.iters >= 12 && r.iters <= 50, "{r:?}");
            assert!(r.value > 0.0);
        }
    }
}
