#!/usr/bin/env bash
# Instructions per round trip of this provider on Soft-RoCE: `datperf client` (2-byte
# send/recv and RDMA-write ping-pongs on IA `rxe0`) under callgrind, its server beside it, in
# one VM run of ../shared/rxe-vm; then, per build, the client's instructions (the whole run,
# setup included: compare builds by the difference) and the inclusive instructions per call of
# the facade's posts and of the provider's post, poll and completion handling.
#
#   dat-provider-verbs/tests/rxe-callgrind.sh before=DIR after=DIR
#       # each DIR holds a release datperf (cargo build --release -p dat-perf --features verbs)
#       # inside the checkout
#
# valgrind comes from the host (`apt-get install valgrind`; the guest shares the host's Debian
# release): the binary and its tools directory are copied under the output directory, which
# the guest sees (rxe-vm refuses to share a system directory). Environment: RXE_VM (the
# rxe-vm script), RXE_CG_ITERS (round trips per test, default 400). Output:
# target/rxe-callgrind-verbs/.
set -euo pipefail
# shellcheck source=../../scripts/rxe-bench-lib.sh
. "$(dirname "$0")/../../scripts/rxe-bench-lib.sh"

if [ "${1:-}" = --guest ]; then
    shift
    out=$1 iters=$2 vg=$3
    shift 3
    export DAT_CONF=$PWD/dat-provider-verbs/tests/rxe.toml VALGRIND_LIB=$out/valgrind-lib
    for pair in "$@"; do
        l=${pair%%=*} d=${pair#*=}
        taskset -c 0 "$d/datperf" server --ia rxe0 --once --timeout-s 300 >"$out/$l-srv.log" 2>&1 &
        s=$!
        sleep 1
        taskset -c 1 "$vg" --tool=callgrind --callgrind-out-file="$out/$l.callgrind" \
            "$d/datperf" client 127.0.0.1 --ia rxe0 --tests lat --sizes 2 --iters "$iters" \
            --budget-ms 600000 --timeout-s 600 --json >"$out/$l-client.json" 2>"$out/$l-client.err" \
            || echo "datperf $l failed" >&2
        wait $s || true
    done
    exit 0
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
vm=$(rxe_vm rxe-callgrind)
command -v valgrind >/dev/null && [ -d /usr/libexec/valgrind ] \
    || { echo "rxe-callgrind: needs the host's valgrind (apt-get install valgrind)" >&2; exit 2; }
out="$root/target/rxe-callgrind-verbs"
mkdir -p "$out"
cp "$(command -v valgrind)" "$out/valgrind"
cp "$(command -v valgrind).bin" "$out/valgrind.bin"
rm -rf "$out/valgrind-lib" && cp -a /usr/libexec/valgrind "$out/valgrind-lib"
iters=${RXE_CG_ITERS:-400}
pairs=()
for a in "$@"; do
    d=$(cd "${a#*=}" && pwd)
    [ -x "$d/datperf" ] || { echo "rxe-callgrind: no $d/datperf" >&2; exit 2; }
    case $d in "$root"/*) ;; *) echo "rxe-callgrind: $d is outside $root" >&2; exit 2 ;; esac
    pairs+=("${a%%=*}=$d")
done
"$vm" --timeout 1800 --share "$root" \
    --env RUST_LOG="${RUST_LOG:-warn}" \
    -- "$root/dat-provider-verbs/tests/rxe-callgrind.sh" --guest "$out" "$iters" "$out/valgrind" "${pairs[@]}"
for pair in "${pairs[@]}"; do
    l=${pair%%=*}
    f="$out/$l.callgrind"
    [ -s "$f" ] || { echo "$l: no profile" >&2; continue; }
    callgrind_annotate --inclusive=yes --tree=caller --threshold=100 "$f" >"$out/$l.annotate"
    total=$(awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }' "$out/$l.annotate")
    echo "$l: $total Ir in the client, $iters round trips of each test ($out/$l.annotate)"
    for fn in 'dat::ep::Ep::post_send' 'dat::ep::Ep::post_rdma_write' \
        'VerbsIa as dat_core::provider::Transport>::post' \
        'dat_provider_verbs::ia::Shared::poll_cq' 'dat_provider_verbs::ia::Shared::handle_wc' \
        'dat_provider_verbs::ia::Shared::progress'; do
        # --tree=caller: a function's block lists its callers ("N (Mx) caller") above its
        # own "N * function" line; the calls are the sum of the Mx.
        awk -v fn="$fn" '
            /^ *$/ { calls = 0; next }
            / \* / { if (index($0, fn) && !done) { gsub(",", "", $1); ir = $1; n = calls; done = 1 }
                      calls = 0; next }
            match($0, /\(([0-9,]+)x\)/) { c = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", c); calls += c }
            END { if (done) printf "  %-58s %12s Ir inclusive %8d calls %8.0f per call\n", fn, ir, n, n ? ir / n : 0 }
        ' "$out/$l.annotate"
    done
done
