/*
 * dapl-call-timer: an LD_PRELOAD library that times the two calls of a `dapltest -T P` RDMA
 * write loop in the consumer's process, whichever provider libdat2 loads (OFA dapl or
 * libdat_capi.so), so that their per-call costs compare directly:
 *
 *   dat_ep_post_rdma_write   the post, up to and including its doorbell (on Soft-RoCE the
 *                            kernel's whole protocol run happens inside that system call)
 *   write                    the system calls made inside a post (rxe's doorbell), so that
 *                            the post's own user-space time is the post's less theirs
 *   dat_evd_dequeue          every dequeue, and apart from the others the one that finds the
 *                            completion of the last post; how many dequeues each post needed
 *
 * Built and used by dat-capi/tests/rxe-dapltest-calls.sh. At exit it prints one line to
 * stderr, `CALLS key=value ...`, with the mean nanoseconds of each call (the TSC, calibrated
 * against CLOCK_MONOTONIC over the process's life). Single-threaded consumers only (dapltest's
 * performance client): the counters are plain globals.
 */
#define _GNU_SOURCE
#include <dat2/udat.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

typedef DAT_RETURN (*dequeue_fn)(DAT_EVD_HANDLE, DAT_EVENT *);
typedef DAT_RETURN (*post_fn)(DAT_EP_HANDLE, DAT_COUNT, DAT_LMR_TRIPLET *, DAT_DTO_COOKIE,
                              const DAT_RMR_TRIPLET *, DAT_COMPLETION_FLAGS);

static struct {
    uint64_t posts, post_cycles;
    /* System calls (`write`) made inside posts, and their cycles. */
    uint64_t in_post, syscalls, syscall_cycles;
    /* Each post's system-call cycles (the first SAMPLES posts), for the median and the 90th
     * percentile: a mean mixes the usual call with the ones an interrupt or a preemption
     * lengthened. */
    uint64_t post_syscall;
    uint64_t sample[1 << 17];
    uint64_t dequeues, dequeue_cycles;
    /* Dequeues that found an event after a post, their cycles, and how many of them were the
     * post's first dequeue. */
    uint64_t found, found_cycles, first_try;
    /* Dequeues since the last post (0: no post waiting). */
    uint64_t since_post;
    uint64_t tsc0;
    struct timespec t0;
} s;

__attribute__((constructor)) static void start(void)
{
    clock_gettime(CLOCK_MONOTONIC, &s.t0);
    s.tsc0 = __rdtsc();
}

DAT_RETURN dat_evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT *event)
{
    static dequeue_fn next;
    if (!next)
        next = (dequeue_fn)dlsym(RTLD_NEXT, "dat_evd_dequeue");
    uint64_t a = __rdtsc();
    DAT_RETURN r = next(evd, event);
    uint64_t d = __rdtsc() - a;
    s.dequeues++;
    s.dequeue_cycles += d;
    if (s.since_post) {
        if (r == DAT_SUCCESS) {
            s.found++;
            s.found_cycles += d;
            s.first_try += s.since_post == 1;
            s.since_post = 0;
        } else {
            s.since_post++;
        }
    }
    return r;
}

DAT_RETURN dat_ep_post_rdma_write(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *local,
                                  DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
                                  DAT_COMPLETION_FLAGS flags)
{
    static post_fn next;
    if (!next)
        next = (post_fn)dlsym(RTLD_NEXT, "dat_ep_post_rdma_write");
    s.in_post = 1;
    s.post_syscall = 0;
    uint64_t a = __rdtsc();
    DAT_RETURN r = next(ep, n, local, cookie, remote, flags);
    s.post_cycles += __rdtsc() - a;
    s.in_post = 0;
    if (s.posts < sizeof s.sample / sizeof s.sample[0])
        s.sample[s.posts] = s.post_syscall;
    s.posts++;
    s.since_post = 1;
    return r;
}

ssize_t write(int fd, const void *buf, size_t len)
{
    typedef ssize_t (*write_fn)(int, const void *, size_t);
    static write_fn next;
    if (!next)
        next = (write_fn)dlsym(RTLD_NEXT, "write");
    if (!s.in_post)
        return next(fd, buf, len);
    uint64_t a = __rdtsc();
    ssize_t r = next(fd, buf, len);
    uint64_t d = __rdtsc() - a;
    s.syscall_cycles += d;
    s.post_syscall += d;
    s.syscalls++;
    return r;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

__attribute__((destructor)) static void report(void)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t tsc = __rdtsc() - s.tsc0;
    double ns = (t1.tv_sec - s.t0.tv_sec) * 1e9 + (t1.tv_nsec - s.t0.tv_nsec);
    if (!s.posts || !tsc)
        return;
    double per = ns / (double)tsc; /* nanoseconds per TSC tick */
    size_t m = s.posts < sizeof s.sample / sizeof s.sample[0] ? s.posts
                                                             : sizeof s.sample / sizeof s.sample[0];
    qsort(s.sample, m, sizeof s.sample[0], by_value);
    fprintf(stderr,
            "CALLS posts=%llu post_ns=%.0f post_syscalls=%llu post_syscall_ns=%.0f post_syscall_p50_ns=%.0f post_syscall_p90_ns=%.0f dequeues=%llu dequeue_ns=%.0f found=%llu "
            "found_ns=%.0f first_try=%llu\n",
            (unsigned long long)s.posts, per * s.post_cycles / s.posts,
            (unsigned long long)s.syscalls, per * s.syscall_cycles / s.posts,
            per * s.sample[m / 2], per * s.sample[m * 9 / 10],
            (unsigned long long)s.dequeues,
            s.dequeues ? per * s.dequeue_cycles / s.dequeues : 0.0,
            (unsigned long long)s.found, s.found ? per * s.found_cycles / s.found : 0.0,
            (unsigned long long)s.first_try);
}
