#!/usr/bin/env bash
# Bandwidth on Soft-RoCE (rxe0) in one VM run of ../shared/rxe-vm: datperf's streaming send and
# RDMA write (64 KiB, a window of outstanding operations) on IA `rxe0` beside perftest
# (ib_send_bw, ib_write_bw: the raw verbs path) and `dapltest -T P` RW 64 KiB on OFA dapl's
# `ofa-v2-rxe` and on ours (through the stock libdat2 and libdat_capi.so), several rounds, then
# the median of each figure. Emulation makes the absolute figures meaningless: compare figures
# of one run only.
#
#   dat-provider-verbs/tests/rxe-bw.sh                    # builds this checkout, label "this"
#   dat-provider-verbs/tests/rxe-bw.sh before=DIR after=DIR
#       # each DIR holds a release `datperf` (built with --features verbs) and `libdat_capi.so`
#       # (built with --features dat/verbs), inside the checkout
#
# Every pair runs server on vCPU 0 and client on vCPU 1 (taskset). All figures are MB/s of
# 10^6 bytes: datperf's own unit; perftest's message rate times the size, and dapltest's "MB/s"
# (2^20 bytes) converted.
#
# Environment: RXE_VM (the rxe-vm script), RXE_BW_ROUNDS (default 3), RXE_BW_SIZE (bytes per
# message, default 65536), RXE_BW_MSGS (messages per figure, default 1024), RXE_BW_WINDOW
# (datperf's window, default 64; perftest's tx depth is its default 128). Raw logs and the
# results go to target/rxe-bw/.
set -euo pipefail
# shellcheck source=../../scripts/rxe-bench-lib.sh
. "$(dirname "$0")/../../scripts/rxe-bench-lib.sh"

# In the guest: `--guest OUT ROUNDS SIZE MSGS WINDOW LABEL=DIR...`.
if [ "${1:-}" = --guest ]; then
    shift
    out=$1 rounds=$2 size=$3 msgs=$4 window=$5
    shift 5
    res="$out/results.txt"
    : >"$res"
    export DAT_CONF=$PWD/dat-provider-verbs/tests/rxe.toml
    rec() { echo "$1 $2 $3" >>"$res"; } # label measure value
    datperf_bw() { # label dir round
        local l=$1 r=$3 op v
        rxe_datperf_run "$out" "$l" "$2" "$r" bw 60 --tests bw --sizes "$size" \
            --bytes $((size * msgs)) --window "$window"
        while read -r op v; do
            rec "$l" "datperf-$op" "$v"
        done < <(sed -nE 's/.*"op":"([^"]*)".*"value":([0-9.e+-]+).*/\1 \2/p' "$out/$l-bw-$r.json")
    }
    perftest() { # prog round
        local p=$1 r=$2
        rxe_perftest_run "$out" "$p" "$r" -s "$size" -n "$msgs" --report_gbits
        # The result line: bytes iterations BW-peak BW-average (Gb/s, two decimals) MsgRate
        # (Mpps, six): the message rate times the size is the finer figure.
        awk '$1 == '"$size"' && $2 == '"$msgs"' { printf "%.2f\n", $5 * $1 }' "$out/$p-$r.log" |
            while read -r v; do rec perftest "$p-avg" "$v"; done
    }
    dapltest_bw() { # label ia round [DAT_OVERRIDE]
        local log="$out/$1-dapltest-$3" v
        rxe_dapltest_run "$log" "$2" "$msgs" "${4:-}" 16 "$size"
        # "Bandwidth : N MB/sec" in 2^20 bytes.
        v=$(grep -a 'Bandwidth' "$log.log" | grep -oE '[0-9]+(\.[0-9]+)?' | head -n 1 || true)
        if [ -n "$v" ]; then
            rec "$1" "dapltest-P-RW$size-MB/s" "$(awk -v v="$v" 'BEGIN { printf "%.2f", v * 1.048576 }')"
        fi
    }
    rxe_bench_rounds rxe-bw "$rounds" "$out" datperf_bw perftest dapltest_bw ib_send_bw ib_write_bw "$@"
    echo "median of $rounds rounds, $msgs messages of $size bytes each (MB/s, 10^6 bytes):"
    rxe_medians "$res"
    exit 0
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
rxe_bench_host rxe-bw "$root/dat-provider-verbs/tests/rxe-bw.sh" 4 "${RXE_BW_ROUNDS:-3}" \
    "${RXE_BW_SIZE:-65536}" "${RXE_BW_MSGS:-1024}" "${RXE_BW_WINDOW:-64}" "$@"
