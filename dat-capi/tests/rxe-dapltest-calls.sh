#!/usr/bin/env bash
# Where a `dapltest -T P` operation's time goes in the consumer, per call: the RW 2 B polling
# loop of rxe-dapltest-p.sh on Soft-RoCE in one VM run of ../shared/rxe-vm, OFA dapl's
# `ofa-v2-rxe` beside ours (the stock libdat2 loading each given libdat_capi.so on IA `rxe0`),
# the client run under dapl-call-timer.so (dat-capi/tests/dapl-call-timer.c, LD_PRELOAD), which
# times every dat_ep_post_rdma_write and dat_evd_dequeue with the TSC. Per round and library:
# operations per second, the mean post (its doorbell included: rxe runs the whole exchange in
# that system call) and its user-space part (less the `write` calls made inside it, whose
# median and 90th percentile per post are shown too), the mean dequeue that finds the post's completion, and how many posts had
# it found by their first dequeue; then the medians and the median per-round differences to
# OFA. Emulation makes the absolute figures meaningless: compare one run only.
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
        awk -v l="$1" -v r="$3" -v ops="$ops" '{
            for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            printf "%s %s %s %s %s %.3f %s %s %s %s\n", l, r, ops, v["post_ns"], v["found_ns"],
                v["found"] ? v["first_try"] / v["found"] : 0,
                v["post_ns"] - v["post_syscall_ns"], v["post_syscall_ns"],
                v["post_syscall_p50_ns"], v["post_syscall_p90_ns"]
        }' <<<"$calls" >>"$res"
    }
    rxe_rotate "$out" "$rounds" run "$@"
    echo "dapltest -T P RW 2 B, $rounds rounds of $iters operations, per library: median ops/s," \
        "post ns, finding dequeue ns, share of posts whose first dequeue found the completion"
    awk '{ print $1 }' "$res" | sort -u | while read -r l; do
        # shellcheck disable=SC2207 # numbers: words on purpose
        o=($(awk -v l="$l" '$1 == l { print $3 }' "$res"))
        # shellcheck disable=SC2207
        p=($(awk -v l="$l" '$1 == l { print $4 }' "$res"))
        # shellcheck disable=SC2207
        f=($(awk -v l="$l" '$1 == l { print $5 }' "$res"))
        # shellcheck disable=SC2207
        t=($(awk -v l="$l" '$1 == l { print $6 }' "$res"))
        # shellcheck disable=SC2207
        u=($(awk -v l="$l" '$1 == l { print $7 }' "$res"))
        # shellcheck disable=SC2207
        k=($(awk -v l="$l" '$1 == l { print $8 }' "$res"))
        # shellcheck disable=SC2207
        k50=($(awk -v l="$l" '$1 == l { print $9 }' "$res"))
        # shellcheck disable=SC2207
        k90=($(awk -v l="$l" '$1 == l { print $10 }' "$res"))
        printf '  %-8s %10s ops/s  post %7s ns (user %6s, system calls %7s: p50 %s, p90 %s)  dequeue %6s ns  first try %s\n' \
            "$l" "$(median "${o[@]}")" "$(median "${p[@]}")" "$(median "${u[@]}")" \
            "$(median "${k[@]}")" "$(median "${k50[@]}")" "$(median "${k90[@]}")" \
            "$(median "${f[@]}")" "$(median "${t[@]}")"
    done
    echo "median per-round difference to OFA (ns; positive: slower than OFA)"
    awk '{ print $1 }' "$res" | sort -u | grep -vx ofa | while read -r l; do
        # shellcheck disable=SC2207
        dp=($(awk -v l="$l" '$1 == "ofa" { p[$2] = $4 } $1 == l { q[$2] = $4 }
            END { for (r in q) if (r in p) print q[r] - p[r] }' "$res"))
        # shellcheck disable=SC2207
        df=($(awk -v l="$l" '$1 == "ofa" { p[$2] = $5 } $1 == l { q[$2] = $5 }
            END { for (r in q) if (r in p) print q[r] - p[r] }' "$res"))
        # shellcheck disable=SC2207
        du=($(awk -v l="$l" '$1 == "ofa" { p[$2] = $7 } $1 == l { q[$2] = $7 }
            END { for (r in q) if (r in p) print q[r] - p[r] }' "$res"))
        [ ${#dp[@]} -gt 0 ] || continue
        printf '  %-8s post %+g (user %+g)  dequeue %+g  (%d rounds)\n' "$l" "$(median "${dp[@]}")" \
            "$(median "${du[@]}")" "$(median "${df[@]}")" "${#dp[@]}"
    done
    exit 0
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
mkdir -p target/rxe-dapltest-calls
cc -O2 -Wall -shared -fPIC -o target/rxe-dapltest-calls/dapl-call-timer.so \
    dat-capi/tests/dapl-call-timer.c -ldl
rxe_capi_host rxe-dapltest-calls "$root/dat-capi/tests/rxe-dapltest-calls.sh" 1800 2 \
    "${RXE_C_ROUNDS:-5}" "${RXE_C_ITERS:-20000}" "$@"
