//! What the scheduler did to the calling thread.

/// How many times the kernel took the CPU from the calling thread while it could still run
/// (preemption, or `sched_yield` with another thread ready), from `getrusage(RUSAGE_THREAD)`.
/// `None` if the kernel does not say (then callers should assume no contention).
pub fn involuntary_switches() -> Option<u64> {
    switches().map(|(involuntary, _)| involuntary)
}

/// The calling thread's context switches so far, `(involuntary, all)`: as
/// [`involuntary_switches`], and the voluntary ones (blocking, sleeping) added. One
/// `getrusage(RUSAGE_THREAD)`; `None` if the kernel does not say.
pub fn switches() -> Option<(u64, u64)> {
    // SAFETY: `getrusage` writes only into the `rusage` we pass, which is plain old data
    // (all-zero is a valid value) and lives for the whole call.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_THREAD asks about the calling thread only.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let n = |v: libc::c_long| u64::try_from(v).unwrap_or(0);
    (rc == 0).then(|| (n(ru.ru_nivcsw), n(ru.ru_nivcsw) + n(ru.ru_nvcsw)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yielding_to_a_runnable_thread_on_the_same_cpu_counts_as_involuntary() {
        // Two threads pinned to one CPU: each yield of the first, with the second spinning
        // ready to run, is a context switch the first did not ask for by blocking.
        // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET only writes inside it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above; CPU 0 exists on every machine.
        unsafe { libc::CPU_SET(0, &mut set) };
        let pin = move || {
            // SAFETY: pins the calling thread (pid 0) to the set built above.
            let rc =
                unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
            assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                pin();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        pin();
        let before = involuntary_switches().expect("getrusage(RUSAGE_THREAD)");
        for _ in 0..50 {
            std::thread::sleep(std::time::Duration::from_micros(1)); // let the spinner start
            std::thread::yield_now();
        }
        let after = involuntary_switches().unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(
            after > before,
            "no involuntary switch counted ({before} -> {after})"
        );
    }

    #[test]
    fn a_sleep_counts_as_a_switch_but_not_an_involuntary_one() {
        let (inv0, all0) = switches().expect("getrusage(RUSAGE_THREAD)");
        std::thread::sleep(std::time::Duration::from_millis(1));
        let (inv1, all1) = switches().unwrap();
        assert!(all1 > all0, "the sleep blocked: {all0} -> {all1}");
        assert!(inv1 <= all1 && inv0 <= all0);
        assert!(all1 - all0 > inv1 - inv0, "the sleep's switch is voluntary");
    }
}
