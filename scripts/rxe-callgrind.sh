#!/usr/bin/env bash
# Instructions per call on Soft-RoCE, under callgrind, in one VM run of ../shared/rxe-vm; then,
# per build, the client's instructions (the whole run, setup included: compare builds by the
# difference) and the inclusive instructions per call of the functions that matter
# (callgrind_annotate on the host). Two modes:
#
#   scripts/rxe-callgrind.sh capi before=DIR after=DIR [ofa]
#       # the C ABI: `dapltest -T P` (RDMA write 2 B, polling) through the stock libdat2 and
#       # each DIR's libdat_capi.so (cargo build --release -p dat-capi --features dat/verbs) on
#       # IA `rxe0`; `ofa` profiles OFA dapl's `ofa-v2-rxe` the same way. libdat2's entries
#       # (`dat_ep_post_rdma_write`, `dat_evd_dequeue`) compare with OFA's. Default 2000
#       # operations.
#   scripts/rxe-callgrind.sh datperf before=DIR after=DIR
#       # the Rust API and the verbs provider: `datperf client` (2-byte send/recv and
#       # RDMA-write ping-pongs on IA `rxe0`), each DIR's release datperf (cargo build
#       # --release -p dat-perf --features verbs), its server beside it. Default 400 round
#       # trips per test.
#
# Each DIR lies inside the checkout (the guest sees the checkout only). valgrind comes from the
# host (`apt-get install valgrind`; the guest runs the host's Debian release): its binary and
# tools directory are copied under the output directory (rxe-vm refuses to share a system
# directory). Environment: RXE_VM (the rxe-vm script), RXE_CG_ITERS (operations or round
# trips), RXE_CG_DAPL_MODE (capi: `p`, the default, polls with dat_evd_dequeue; `b` waits
# with dat_evd_wait), RXE_CG_OPTS (more callgrind options, e.g. `--dump-instr=yes` for
# per-instruction counts: `callgrind_annotate --auto=yes` then annotates by address, and this
# script prints scripts/cg-kinds.py's atomics, indirect calls and returns per operation). Output:
# target/rxe-callgrind/MODE/.
set -euo pipefail
# shellcheck source=rxe-bench-lib.sh
. "$(dirname "$0")/rxe-bench-lib.sh"

usage() {
    echo "usage: $0 capi LABEL=DIR... [ofa] | $0 datperf LABEL=DIR..." >&2
    exit 2
}

# In the guest: `--guest MODE OUT ITERS VALGRIND LABEL=DIR...`, one profile per build.
if [ "${1:-}" = --guest ]; then
    shift
    mode=$1 out=$2 iters=$3 vg=$4
    shift 4
    export DAT_CONF=$PWD/dat-provider-verbs/tests/rxe.toml VALGRIND_LIB=$out/vglib
    # shellcheck disable=SC2206 # RXE_CG_OPTS: words on purpose
    cg=("$vg" --tool=callgrind ${RXE_CG_OPTS:-})
    for pair in "$@"; do
        l=${pair%%=*} d=${pair#*=}
        case $mode in
        capi)
            ia=rs-verbs conf=
            if [ "$l" = ofa ]; then
                ia=ofa-v2-rxe
            else
                conf=$(rxe_capi_conf "$out" "$l" "$d")
            fi
            (
                [ -n "$conf" ] && export DAT_OVERRIDE=$conf
                taskset -c 0 timeout 900 dapltest -T S -D "$ia" >"$out/$l-srv.log" 2>&1 &
                s=$!
                sleep 2
                taskset -c 1 timeout 900 "${cg[@]}" --callgrind-out-file="$out/$l.callgrind" \
                    dapltest -T P -s "$RXE_IP" -D "$ia" -i "$iters" -p 1 -m "${RXE_CG_DAPL_MODE:-p}" RW 2 1 \
                    >"$out/$l-client.log" 2>&1 || echo "dapltest $l failed" >&2
                timeout 30 dapltest -T Q -s "$RXE_IP" -D "$ia" >/dev/null 2>&1 || true
                wait $s || true
            )
            ;;
        datperf)
            taskset -c 0 "$d/datperf" server --ia rxe0 --once --timeout-s 300 \
                >"$out/$l-srv.log" 2>&1 &
            s=$!
            sleep 1
            taskset -c 1 "${cg[@]}" --callgrind-out-file="$out/$l.callgrind" \
                "$d/datperf" client 127.0.0.1 --ia rxe0 --tests lat --sizes 2 --iters "$iters" \
                --budget-ms 600000 --timeout-s 600 --json \
                >"$out/$l-client.json" 2>"$out/$l-client.err" || echo "datperf $l failed" >&2
            wait $s || true
            ;;
        esac
    done
    exit 0
fi

mode=${1:-}
[ $# -ge 2 ] || usage
shift
case $mode in
capi)
    need=libdat_capi.so iters=${RXE_CG_ITERS:-2000} what="$iters dapltest -T P operations"
    # The entries a dapltest P client calls per operation, and the calls under them (the
    # difference is the C ABI crate's own cost).
    fns=('dat_ep_post_rdma_write' 'dat_evd_dequeue' 'dat_evd_wait' 'dat::evd::Evd::wait'
        'dat_capi::calls::ep::ep_post_rdma_write'
        'dat::ep_post::<impl dat::ep::Ep>::post_rdma_write'
        'dat_capi::calls::evd::evd_dequeue' 'dat::evd::Evd::dequeue'
        'dat_capi::calls::convert::event_to_c')
    ;;
datperf)
    need=datperf iters=${RXE_CG_ITERS:-400} what="$iters round trips of each test"
    # The facade's posts, and the provider's post, progress and CQ poll (its completion
    # handling, `Shared::handle_wc`, is inlined there).
    fns=('dat::ep_post::<impl dat::ep::Ep>::post_send'
        'dat::ep_post::<impl dat::ep::Ep>::post_rdma_write'
        'VerbsIa as dat_core::provider::Transport>::post'
        'VerbsIa as dat_core::provider::Transport>::progress'
        'Shared>::poll_cq' 'dat_provider_verbs::ia::Shared::poll_cq')
    ;;
*) usage ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
vm=$(rxe_vm rxe-callgrind)
[ -x /usr/bin/valgrind.bin ] && [ -d /usr/libexec/valgrind ] \
    || { echo "rxe-callgrind: needs the host's valgrind (apt-get install valgrind)" >&2; exit 2; }
out="$root/target/rxe-callgrind/$mode"
mkdir -p "$out"
cp /usr/bin/valgrind.bin "$out/valgrind"
rm -rf "$out/vglib"
cp -r /usr/libexec/valgrind "$out/vglib"
pairs=()
for a in "$@"; do
    if [ "$a" = ofa ] && [ "$mode" = capi ]; then
        pairs+=(ofa=)
        continue
    fi
    case $a in *=*) ;; *) usage ;; esac
    pairs+=("$(rxe_pair rxe-callgrind "$a" "$need")") || exit 2
done
"$vm" --timeout 1800 --share "$root" \
    --env RUST_LOG="${RUST_LOG:-warn}" --env RXE_CG_DAPL_MODE="${RXE_CG_DAPL_MODE:-p}" \
    --env RXE_CG_OPTS="${RXE_CG_OPTS:-}" \
    -- "$root/scripts/rxe-callgrind.sh" --guest "$mode" "$out" "$iters" "$out/valgrind" "${pairs[@]}"
for pair in "${pairs[@]}"; do
    l=${pair%%=*}
    f="$out/$l.callgrind"
    [ -s "$f" ] || { echo "$l: no profile" >&2; continue; }
    callgrind_annotate --inclusive=yes --tree=caller --threshold=100 "$f" >"$out/$l.annotate" 2>/dev/null
    total=$(awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }' "$out/$l.annotate")
    echo "$l: $total Ir in the client, $what ($out/$l.annotate)"
    # --tree=caller prints a block per function: its callers ("<", with "(Nx)" calls), the
    # function ("*"), a blank line. A name given matches a function whose name (without its
    # file and object) is it or ends with it; of several, the costliest is shown.
    perl -e '
        my @want = @ARGV; my %best; my $calls = 0;
        while (<STDIN>) {
            if (/^\s*$/) { $calls = 0; next }
            if (/^\s*([\d,]+)\s+\([^)]*\)\s+<.*\(([\d,]+)x\)/) { (my $c = $2) =~ s/,//g; $calls += $c; next }
            if (/^\s*([\d,]+)\s+\([^)]*\)\s+\*\s+\S*?:(.*?)(?: \[.*\])?$/) {
                my ($ir, $fn) = ($1, $2); $ir =~ s/,//g;
                for my $w (@want) {
                    next unless $calls > 0 && substr($fn, -length $w) eq $w;
                    $best{$w} = [$ir, $calls] if !$best{$w} || $ir > $best{$w}[0];
                }
                $calls = 0;
            }
        }
        for my $w (@want) {
            my ($ir, $c) = @{ $best{$w} || [0, 0] };
            printf "  %-58s %12d Ir %8d calls %8.0f Ir/call\n", $w, $ir, $c, $c ? $ir / $c : 0;
        }
    ' "${fns[@]}" <"$out/$l.annotate"
    # With per-instruction counts, the kinds of instruction the count does not weigh.
    case " ${RXE_CG_OPTS:-} " in
    *" --dump-instr=yes "*) python3 "$root/scripts/cg-kinds.py" "$f" "$iters" ;;
    esac
done
