/*
 * tcg-costs: what one x86-64 instruction of each kind costs where it runs, in nanoseconds:
 * register arithmetic, 8-byte loads and stores, 16-byte SSE loads and stores (what compilers
 * emit for struct copies and zeroing), a locked read-modify-write, a direct call and return,
 * an indirect call and return. Under TCG (Soft-RoCE's VM) the kinds differ far more than on
 * hardware, so an instruction count alone misweighs a path (BENCHMARKS.md, session 17).
 *
 *   scripts/tcg-costs.sh        # builds this on the host, runs it here and in the rxe VM
 *
 * Each figure is a loop of 8 instructions of the kind per iteration, less the empty loop,
 * divided by 8; the best of 3 runs of 10^7 iterations.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define N 10000000L

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t buf[32] __attribute__((aligned(64)));
__attribute__((noinline)) static void leaf(void) { __asm__ volatile(""); }
static void (*volatile leaf_ptr)(void) = leaf;

#define LOOP(body)                                                                           \
    ({                                                                                       \
        double best = 1e30;                                                                  \
        for (int run = 0; run < 3; run++) {                                                  \
            double t0 = now();                                                               \
            for (long i = 0; i < N; i++) {                                                   \
                body;                                                                        \
            }                                                                                \
            double t = (now() - t0) / N;                                                     \
            if (t < best)                                                                    \
                best = t;                                                                    \
        }                                                                                    \
        best;                                                                                \
    })

int main(void)
{
    uint64_t a = 1, b = 2, c = 3, d = 4, *p = buf;
    double empty = LOOP(__asm__ volatile("" ::: "memory"));
    double alu = LOOP(__asm__ volatile("add %1,%0; add %2,%0; add %3,%0; add %1,%2;"
                                       "add %0,%3; add %2,%1; add %3,%2; add %0,%1"
                                       : "+r"(a), "+r"(b), "+r"(c), "+r"(d)));
    double load = LOOP(__asm__ volatile("mov (%4),%0; mov 8(%4),%1; mov 16(%4),%2; mov 24(%4),%3;"
                                        "mov 32(%4),%0; mov 40(%4),%1; mov 48(%4),%2; mov 56(%4),%3"
                                        : "=&r"(a), "=&r"(b), "=&r"(c), "=&r"(d)
                                        : "r"(p)
                                        : "memory"));
    double store = LOOP(__asm__ volatile("mov %0,(%4); mov %1,8(%4); mov %2,16(%4); mov %3,24(%4);"
                                         "mov %0,32(%4); mov %1,40(%4); mov %2,48(%4); mov %3,56(%4)"
                                         :
                                         : "r"(a), "r"(b), "r"(c), "r"(d), "r"(p)
                                         : "memory"));
    double sse = LOOP(__asm__ volatile("movups (%0),%%xmm0; movups 16(%0),%%xmm1;"
                                       "movups 32(%0),%%xmm2; movups 48(%0),%%xmm3;"
                                       "movups %%xmm0,64(%0); movups %%xmm1,80(%0);"
                                       "movups %%xmm2,96(%0); movups %%xmm3,112(%0)"
                                       :
                                       : "r"(p)
                                       : "memory", "xmm0", "xmm1", "xmm2", "xmm3"));
    double atomic = LOOP(__asm__ volatile("lock xadd %0,(%1); lock xadd %0,(%1); lock xadd %0,(%1);"
                                          "lock xadd %0,(%1); lock xadd %0,(%1); lock xadd %0,(%1);"
                                          "lock xadd %0,(%1); lock xadd %0,(%1)"
                                          : "+r"(a)
                                          : "r"(p)
                                          : "memory"));
    double call = LOOP(leaf(); leaf(); leaf(); leaf(); leaf(); leaf(); leaf(); leaf());
    double icall = LOOP(leaf_ptr(); leaf_ptr(); leaf_ptr(); leaf_ptr(); leaf_ptr(); leaf_ptr();
                        leaf_ptr(); leaf_ptr());
    printf("ns per instruction: add %.2f  load %.2f  store %.2f  16-byte load/store %.2f  "
           "lock xadd %.2f  call+ret %.2f  indirect call+ret %.2f (empty loop %.2f per iteration)\n",
           (alu - empty) / 8, (load - empty) / 8, (store - empty) / 8, (sse - empty) / 8,
           (atomic - empty) / 8, (call - empty) / 8, (icall - empty) / 8, empty);
    return (int)(a + b + c + d) & 0;
}
