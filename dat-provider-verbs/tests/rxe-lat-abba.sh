#!/usr/bin/env bash
# Two builds' 2-byte ping-pongs on Soft-RoCE (rxe0) in one VM run of ../shared/rxe-vm, in
# A B B A order every round (a build's place in the round moved its figures as much as the
# build did: session 6 of the README), and ib_send_lat once per round; then, per build, the
# median of every figure and, for send/recv, in how many rounds B's mean of its two runs beat
# A's. Emulation makes the absolute figures meaningless: compare figures of one run only.
#
#   dat-provider-verbs/tests/rxe-lat-abba.sh A=DIR B=DIR
#       # each DIR holds a release `datperf` (cargo build --release -p dat-perf --features
#       # verbs), inside the checkout
#
# Every pair runs server on vCPU 0 and client on vCPU 1 (taskset), as rxe-lat.sh does.
# Environment: RXE_VM (the rxe-vm script), RXE_LAT_ROUNDS (default 10), RXE_LAT_ITERS (round
# trips per figure, default 2000). Raw logs and the results go to target/rxe-lat-abba/.
set -euo pipefail
# shellcheck source=../../scripts/rxe-bench-lib.sh
. "$(dirname "$0")/../../scripts/rxe-bench-lib.sh"

if [ "${1:-}" = --guest ]; then
    out=$2 rounds=$3 iters=$4 a=$5 b=$6
    res="$out/results.txt"
    : >"$res"
    export DAT_CONF=$PWD/dat-provider-verbs/tests/rxe.toml
    for r in $(seq "$rounds"); do
        echo "rxe-lat-abba: round $r" >&2
        k=0
        for pair in "$a" "$b" "$b" "$a"; do
            k=$((k + 1))
            l=${pair%%=*} d=${pair#*=}
            taskset -c 0 "$d/datperf" server --ia rxe0 --once --timeout-s 30 \
                >"$out/$l-srv-$r-$k.log" 2>&1 &
            s=$!
            sleep 1
            taskset -c 1 "$d/datperf" client 127.0.0.1 --ia rxe0 --tests lat --sizes 2 \
                --iters "$iters" --budget-ms 600000 --timeout-s 30 --json \
                >"$out/$l-$r-$k.json" 2>"$out/$l-$r-$k.err" || echo "datperf $l failed (round $r)" >&2
            wait $s || true
            sed -nE 's/.*"op":"([^"]*)".*"value":([0-9.e+-]+).*/\1 \2/p' "$out/$l-$r-$k.json" \
                | while read -r op v; do echo "$r $l datperf-$op $v" >>"$res"; done
        done
        taskset -c 0 ib_send_lat -d rxe0 -x "$RXE_GID_INDEX" -s 2 -n "$iters" \
            >"$out/perftest-srv-$r.log" 2>&1 &
        s=$!
        sleep 1
        taskset -c 1 ib_send_lat -d rxe0 -x "$RXE_GID_INDEX" -s 2 -n "$iters" "$RXE_IP" \
            >"$out/perftest-$r.log" 2>&1 || echo "ib_send_lat failed (round $r)" >&2
        wait $s || true
        awk -v r="$r" '$1 == 2 && $2 == '"$iters"' { print r, "perftest", "ib_send_lat-t_avg", $6 }' \
            "$out/perftest-$r.log" >>"$res"
    done
    echo "median over $rounds rounds, $iters round trips each (latency in us; A and B twice a round):"
    awk '{ k = $2 " " $3; v[k] = v[k] " " $4 } END { for (k in v) print k, v[k] }' "$res" \
        | sort | while read -r l m vals; do
            # shellcheck disable=SC2086 # one number per word
            printf '  %-8s %-24s %8s   (%s)\n' "$l" "$m" "$(median $vals)" "$(echo $vals)"
        done
    la=${a%%=*} lb=${b%%=*}
    awk -v a="$la" -v b="$lb" '$3 == "datperf-send-recv" { s[$1 " " $2] += $4; n[$1 " " $2]++; r[$1] = 1 }
        END { w = 0; c = 0
              for (i in r) if (n[i " " a] && n[i " " b]) { c++; if (s[i " " b] / n[i " " b] < s[i " " a] / n[i " " a]) w++ }
              printf "  send/recv: %s ahead of %s in %d of %d rounds (mean of its two runs)\n", b, a, w, c }' "$res"
    exit 0
fi

[ $# -eq 2 ] || { echo "usage: $0 A=DIR B=DIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
vm=$(rxe_vm rxe-lat-abba)
out="$root/target/rxe-lat-abba"
mkdir -p "$out"
a=$(rxe_pair rxe-lat-abba "$1" datperf) || exit 2
b=$(rxe_pair rxe-lat-abba "$2" datperf) || exit 2
exec "$vm" --timeout 1800 --env RUST_LOG="${RUST_LOG:-warn}" \
    -- "$root/dat-provider-verbs/tests/rxe-lat-abba.sh" --guest "$out" \
    "${RXE_LAT_ROUNDS:-10}" "${RXE_LAT_ITERS:-2000}" "$a" "$b"
