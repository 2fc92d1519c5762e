#!/usr/bin/env bash
# Latency on Soft-RoCE (rxe0) in one VM run of ../shared/rxe-vm: datperf's 2-byte send/recv and
# RDMA-write ping-pongs on IA `rxe0` beside perftest (ib_send_lat, ib_write_lat) and dapltest -T P
# on OFA dapl's `ofa-v2-rxe` and on ours (through the stock libdat2 and libdat_capi.so), several
# rounds, then the median of each figure and, per build, the median over rounds of each round's
# ratio to the reference measured in that round (`rxe_lat_ratios`: the VM's speed drifts
# between rounds, which a ratio of two medians mixes in). Emulation makes the absolute figures
# meaningless: compare figures of one run only.
#
#   dat-provider-verbs/tests/rxe-lat.sh                    # builds this checkout, label "this"
#   dat-provider-verbs/tests/rxe-lat.sh before=DIR after=DIR
#       # each DIR holds a release `datperf` (built with --features verbs) and `libdat_capi.so`
#       # (built with --features dat/verbs); the labels alternate inside every round
#
# Every pair runs server on vCPU 0 and client on vCPU 1 (taskset), as perftest is run.
# datperf reports a mean: the comparable perftest figure is t_avg (t_typical is a median).
# dapltest -T P -m p RW 2 1 reports operations per second (higher is better).
#
# Environment: RXE_VM (the rxe-vm script), RXE_LAT_ROUNDS (default 3), RXE_LAT_ITERS (round
# trips per figure, default 2000). Raw logs and the results go to target/rxe-lat/.
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
    rec() { echo "$1 $2 $3 $4" >>"$res"; } # label measure value round
    datperf_lat() { # label dir round
        local l=$1 r=$3 op v n
        rxe_datperf_run "$out" "$l" "$2" "$r" lat 30 --tests lat --sizes 2 --iters "$iters"
        while read -r op v n; do
            [ "$n" = "$iters" ] || echo "datperf $l $op: $n round trips, not $iters" >&2
            rec "$l" "datperf-$op" "$v" "$r"
        done < <(sed -nE 's/.*"op":"([^"]*)".*"iters":([0-9]+),"value":([0-9.e+-]+).*/\1 \3 \2/p' \
            "$out/$l-lat-$r.json")
    }
    perftest() { # prog round
        local p=$1 r=$2
        rxe_perftest_run "$out" "$p" "$r" -s 2 -n "$iters"
        # The result line: bytes iterations t_min t_max t_typical t_avg ...
        awk '$1 == 2 && $2 == '"$iters"' { print "t_avg", $6; print "t_typical", $5 }' \
            "$out/$p-$r.log" | while read -r what v; do rec perftest "$p-$what" "$v" "$r"; done
    }
    dapltest_p() { # label ia round [DAT_OVERRIDE]
        local v
        v=$(rxe_dapltest_p "$out/$1-dapltest-$3" "$2" "$iters" "${4:-}")
        if [ -n "$v" ]; then rec "$1" "dapltest-P-RW2-ops/s" "$v" "$3"; fi
    }
    rxe_bench_rounds rxe-lat "$rounds" "$out" datperf_lat perftest dapltest_p ib_send_lat ib_write_lat "$@"
    echo "median of $rounds rounds, $iters round trips each (latency in us, dapltest in ops/s):"
    rxe_medians "$res"
    rxe_lat_ratios "$res"
    exit 0
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
rxe_bench_host rxe-lat "$root/dat-provider-verbs/tests/rxe-lat.sh" 2 \
    "${RXE_LAT_ROUNDS:-3}" "${RXE_LAT_ITERS:-2000}" "$@"
