#!/usr/bin/env bash
# `dapltest -T T -V` (the stock suite's verification transaction test: 2 threads x 4 endpoints,
# 1 000 iterations, every wait a blocking `dat_evd_wait`) on Soft-RoCE in one VM run of
# ../shared/rxe-vm: OFA dapl's `ofa-v2-rxe` beside ours (the stock libdat2 loading each given
# libdat_capi.so on IA `rxe0`), rounds whose order rotates, then the median of each (seconds per
# whole run, lower is better). Emulation makes the absolute figures meaningless: compare one run.
#
#   dat-capi/tests/rxe-dapltest-t.sh before=DIR after=DIR   # each DIR holds a libdat_capi.so
#       # (cargo build --release -p dat-capi --features dat/verbs), inside the checkout
#
# Server on vCPU 0, client on vCPU 1 (taskset). Environment: RXE_VM, RXE_T_ROUNDS (default 3).
# Logs and results: target/rxe-dapltest-t/.
set -euo pipefail
# shellcheck source=../../scripts/rxe-bench-lib.sh
. "$(dirname "$0")/../../scripts/rxe-bench-lib.sh"

if [ "${1:-}" = --guest ]; then
    shift
    out=$1 rounds=$2
    shift 2
    res="$out/results.txt"
    : >"$res"
    export DAT_CONF=$PWD/dat-provider-verbs/tests/rxe.toml
    run() { # label ia round [DAT_OVERRIDE]
        local log=$out/$1-$3 t0 t1
        (
            [ -n "${4:-}" ] && export DAT_OVERRIDE=$4
            taskset -c 0 timeout 300 dapltest -T S -D "$2" >"$log.srv.log" 2>&1 &
            s=$!
            sleep 2
            t0=$(date +%s.%N)
            if taskset -c 1 timeout 300 dapltest -T T -V -t 2 -w 4 -i 1000 -s "$RXE_IP" -D "$2" \
                client RW 4096 1 server RW 2048 4 client SR 1024 4 server SR 4096 2 \
                client SR 1024 3 -f server SR 2048 1 -f >"$log.log" 2>&1; then
                t1=$(date +%s.%N)
                # A failed run counts for no label.
                awk -v l="$1" -v a="$t0" -v b="$t1" 'BEGIN { printf "%s %.2f\n", l, b - a }' >>"$res"
            else
                echo "dapltest -T T on $2 failed ($log.log)" >&2
            fi
            timeout 30 dapltest -T Q -s "$RXE_IP" -D "$2" >/dev/null 2>&1 || true
            wait $s || true
        )
    }
    rxe_rotate "$out" "$rounds" run "$@"
    echo "dapltest -T T -V (2 threads x 4 endpoints, 1000 iterations), $rounds rounds (seconds): median (all)"
    awk '{ v[$1] = v[$1] " " $2 } END { for (k in v) print k, v[k] }' "$res" | sort \
        | while read -r l vals; do
            # shellcheck disable=SC2086 # the values: words on purpose
            printf '  %-8s %8s   (%s)\n' "$l" "$(median $vals)" "$(echo $vals)"
        done
    exit 0
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
rxe_capi_host rxe-dapltest-t "$root/dat-capi/tests/rxe-dapltest-t.sh" 3000 1 "${RXE_T_ROUNDS:-3}" "$@"
