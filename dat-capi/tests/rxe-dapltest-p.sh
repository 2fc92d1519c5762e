#!/usr/bin/env bash
# `dapltest -T P` (RW 2 B, one segment, polling) on Soft-RoCE in one VM run of ../shared/rxe-vm:
# OFA dapl's `ofa-v2-rxe` beside ours (the stock libdat2 loading each given libdat_capi.so on IA
# `rxe0`), many short rounds whose order rotates, then the median of each (operations per
# second, higher is better), and the medians within each of the VM's two modes with the median
# per-round ratio to OFA (`rxe_modes` in scripts/rxe-bench-lib.sh). Only dapltest runs, so a
# round takes a few seconds and a noisy host disturbs fewer of them than in
# dat-provider-verbs/tests/rxe-lat.sh (which measures datperf and perftest too). Emulation
# makes the absolute figures meaningless: compare one run only.
#
#   dat-capi/tests/rxe-dapltest-p.sh before=DIR after=DIR   # each DIR holds a libdat_capi.so
#       # (cargo build --release -p dat-capi --features dat/verbs), inside the checkout
#
# Server on vCPU 0, client on vCPU 1 (taskset). Environment: RXE_VM, RXE_P_ROUNDS (default 15),
# RXE_P_ITERS (operations per figure, default 2000). Logs and results: target/rxe-dapltest-p/.
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
        local v
        v=$(rxe_dapltest_p "$out/$1-$3" "$2" "$iters" "${4:-}")
        # A failed round (e.g. a connection refused under load) counts for no label.
        if [ -n "$v" ]; then echo "$1 $v $3" >>"$res"; fi
    }
    rxe_rotate "$out" "$rounds" run "$@"
    # The best round is printed too: on a loaded host it is the least disturbed one; the upper
    # quartile is a figure of the VM's fast mode (its rounds are bimodal).
    echo "dapltest -T P RW 2 B, $rounds rounds of $iters operations (ops/s): median, upper quartile, best (all)"
    awk '{ v[$1] = v[$1] " " $2 } END { for (k in v) print k, v[k] }' "$res" | sort \
        | while read -r l vals; do
            med=$(median $vals)
            q3=$(upper_quartile $vals)
            best=$(printf '%s\n' $vals | sort -g | tail -n 1)
            printf '  %-8s %10s %10s %10s   (%s)\n' "$l" "$med" "$q3" "$best" "$(echo $vals)"
        done
    rxe_modes "$res"
    exit 0
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
rxe_capi_host rxe-dapltest-p "$root/dat-capi/tests/rxe-dapltest-p.sh" 1800 2 \
    "${RXE_P_ROUNDS:-15}" "${RXE_P_ITERS:-2000}" "$@"
