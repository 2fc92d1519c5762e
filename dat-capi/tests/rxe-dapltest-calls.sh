#!/usr/bin/env bash
# Where a `dapltest -T P` operation's time goes in the consumer, per call: the RW 2 B polling
# loop of rxe-dapltest-p.sh on Soft-RoCE in one VM run of ../shared/rxe-vm, OFA dapl's
# `ofa-v2-rxe` beside ours (the stock libdat2 loading each given libdat_capi.so on IA `rxe0`),
# the client run under dapl-call-timer.so (dat-capi/tests/dapl-call-timer.c, LD_PRELOAD), which
# times every dat_ep_post_rdma_write and dat_evd_dequeue with the TSC. Per round and library:
# operations per second, the mean post (its doorbell included: rxe runs the whole exchange in
# that system call) and its user-space part (less the `write` calls made inside it, whose
# median and 90th percentile per post are shown too), the mean dequeue that finds the post's
# completion, and how many posts had it found by their first dequeue; then the medians and
# the median per-round differences to OFA (rxe_medians, rxe_round_diffs). Emulation makes the absolute figures meaningless: compare one run only.
#
#   dat-capi/tests/rxe-dapltest-calls.sh before=DIR after=DIR   # each DIR holds a
#       # libdat_capi.so (cargo build --release -p dat-capi --features dat/verbs), in the checkout
#
# The timer is built on the host with cc (libdapl-dev's headers). Environment: RXE_VM,
# RXE_C_ROUNDS (default 5), RXE_C_ITERS (operations per round, default 20000). Logs and results:
# target/rxe-dapltest-calls/.
set -euo pipefail
# shellcheck source=../../scripts/rxe-bench-lib.sh
. "$(dirname "$0")/../../scripts/rxe-bench-lib.sh"

if [ "${1:-}" = --guest ]; then
    shift
    out=$1 rounds=$2 iters=$3
    shift 3
    res="$out/results.txt"
    : >"$res"
    export DAT_CONF=$PWD/dat-provider-verbs/tests/rxe.toml
    run() { # label ia round [DAT_OVERRIDE]
        local log=$out/$1-$3 ops calls
        rxe_dapltest_run "$log" "$2" "$iters" "${4:-}" 1 2 "$out/dapl-call-timer.so"
        ops=$(grep -a 'Operation Throughput' "$log.log" | grep -oE '[0-9]+(\.[0-9]+)?' | head -n 1 || true)
        calls=$(grep -a '^CALLS ' "$log.log" | tail -n 1 || true)
        # A failed round counts for no label.
        [ -n "$ops" ] && [ -n "$calls" ] || return 0
        # One `LABEL MEASURE VALUE ROUND` line per measure (rxe_medians, rxe_round_diffs).
        awk -v l="$1" -v r="$3" -v ops="$ops" '{
            for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            printf "%s ops/s %s %s\n", l, ops, r
            printf "%s post-ns %s %s\n", l, v["post_ns"], r
            printf "%s post-user-ns %s %s\n", l, v["post_ns"] - v["post_syscall_ns"], r
            printf "%s post-syscall-ns %s %s\n", l, v["post_syscall_ns"], r
            printf "%s post-syscall-p50-ns %s %s\n", l, v["post_syscall_p50_ns"], r
            printf "%s post-syscall-p90-ns %s %s\n", l, v["post_syscall_p90_ns"], r
            printf "%s finding-dequeue-ns %s %s\n", l, v["found_ns"], r
            printf "%s first-try-share %.3f %s\n", l, v["found"] ? v["first_try"] / v["found"] : 0, r
        }' <<<"$calls" >>"$res"
    }
    rxe_rotate "$out" "$rounds" run "$@"
    echo "dapltest -T P RW 2 B, $rounds rounds of $iters operations: medians per library and measure" \
        "(first-try-share: posts whose first dequeue found the completion)"
    rxe_medians "$res"
    echo "median per-round difference to OFA (ns measures: positive is slower; ops/s: negative is slower)"
    rxe_round_diffs "$res" ofa
    exit 0
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
mkdir -p target/rxe-dapltest-calls
cc -O2 -Wall -shared -fPIC -o target/rxe-dapltest-calls/dapl-call-timer.so \
    dat-capi/tests/dapl-call-timer.c -ldl
rxe_capi_host rxe-dapltest-calls "$root/dat-capi/tests/rxe-dapltest-calls.sh" 1800 2 \
    "${RXE_C_ROUNDS:-5}" "${RXE_C_ITERS:-20000}" "$@"
