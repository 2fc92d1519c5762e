#!/usr/bin/env bash
# Instructions per call of the C ABI on Soft-RoCE: `dapltest -T P` (RW 2 B, polling) through
# the stock libdat2 and `libdat_capi.so` on IA `rxe0`, its client under callgrind, in one VM run
# of ../shared/rxe-vm; then, per build, the inclusive instructions per call of the provider
# table's post and dequeue entries (callgrind_annotate on the host).
#
#   dat-capi/tests/rxe-callgrind.sh before=DIR after=DIR   # each DIR holds a libdat_capi.so
#                                                        # (cargo build --release -p dat-capi
#                                                        #  --features dat/verbs), inside the checkout
#
# valgrind comes from the host (`apt-get install valgrind`; the guest shares the host's
# Debian release): its tools directory is shared with the guest read-only. Environment:
# RXE_VM (the rxe-vm script), RXE_CG_ITERS (operations, default 2000). Output:
# target/rxe-callgrind/.
set -euo pipefail

if [ "${1:-}" = --guest ]; then
    shift
    out=$1 iters=$2 vg=$3
    shift 3
    export DAT_CONF=$PWD/dat-provider-verbs/tests/rxe.toml VALGRIND_LIB=/usr/libexec/valgrind
    for pair in "$@"; do
        l=${pair%%=*} d=${pair#*=}
        conf="$out/$l-dat.conf"
        printf 'rs-verbs u2.0 nonthreadsafe default %s dat.2.0 "rxe0" ""\n' "$d/libdat_capi.so" >"$conf"
        (
            export DAT_OVERRIDE=$conf
            taskset -c 0 timeout 900 dapltest -T S -D rs-verbs >"$out/$l-srv.log" 2>&1 &
            s=$!
            sleep 2
            taskset -c 1 timeout 900 "$vg" --tool=callgrind --callgrind-out-file="$out/$l.callgrind" \
                dapltest -T P -s "$RXE_IP" -D rs-verbs -i "$iters" -p 1 -m p RW 2 1 \
                >"$out/$l-client.log" 2>&1 || echo "dapltest $l failed" >&2
            timeout 30 dapltest -T Q -s "$RXE_IP" -D rs-verbs >/dev/null 2>&1 || true
            wait $s || true
        )
    done
    exit 0
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
vm=${RXE_VM:-$root/../shared/rxe-vm/rxe-vm}
[ -x "$vm" ] || vm=/work/shared/rxe-vm/rxe-vm
[ -x "$vm" ] || { echo "rxe-callgrind: no rxe-vm (set RXE_VM)" >&2; exit 125; }
command -v valgrind >/dev/null && [ -d /usr/libexec/valgrind ] \
    || { echo "rxe-callgrind: needs the host's valgrind (apt-get install valgrind)" >&2; exit 2; }
out="$root/target/rxe-callgrind"
mkdir -p "$out"
cp "$(command -v valgrind)" "$out/valgrind"
iters=${RXE_CG_ITERS:-2000}
pairs=()
for a in "$@"; do
    d=$(cd "${a#*=}" && pwd)
    [ -f "$d/libdat_capi.so" ] || { echo "rxe-callgrind: no $d/libdat_capi.so" >&2; exit 2; }
    case $d in "$root"/*) ;; *) echo "rxe-callgrind: $d is outside $root" >&2; exit 2 ;; esac
    pairs+=("${a%%=*}=$d")
done
"$vm" --timeout 1800 --share "$root" --share /usr/libexec/valgrind:ro \
    --env RUST_LOG="${RUST_LOG:-warn}" \
    -- "$root/dat-capi/tests/rxe-callgrind.sh" --guest "$out" "$iters" "$out/valgrind" "${pairs[@]}"
# Inclusive instructions per call of the entries a dapltest P client calls per operation.
for pair in "${pairs[@]}"; do
    l=${pair%%=*}
    f="$out/$l.callgrind"
    [ -s "$f" ] || { echo "$l: no profile" >&2; continue; }
    callgrind_annotate --inclusive=yes --tree=caller --threshold=100 "$f" >"$out/$l.annotate"
    echo "$l ($iters operations): total $(awk '/PROGRAM TOTALS/ { print $1 }' "$out/$l.annotate") Ir"
    for fn in ep_post_rdma_write evd_dequeue 'handle::get' 'count_post' 'event_to_c'; do
        # The function's own block: its inclusive Ir and the calls of each caller ("(Nx)").
        awk -v fn="$fn" '
            /^ *[0-9,]+ +\* / { cur = ($0 ~ fn); if (cur) { ir = $1; gsub(",", "", ir) } }
            /^ *[0-9,]+ +< / && cur == 0 { pend = pend $0 "\n" }
            /^$/ { if (ir != "" && calls > 0) { printf "  %-22s %12d Ir %8d calls %8.0f Ir/call\n", fn, ir, calls, ir / calls }
                   ir = ""; calls = 0; cur = 0; pend = "" }
            /^ *[0-9,]+ +\* / && cur { n = split(pend, L, "\n"); for (i = 1; i <= n; i++) if (match(L[i], /\(([0-9,]+)x\)/, m)) { c = m[1]; gsub(",", "", c); calls += c } }
        ' "$out/$l.annotate" | head -n 2
    done
done
