#!/usr/bin/env bash
# Instructions per call of the C ABI on Soft-RoCE: `dapltest -T P` (RW 2 B, polling) through
# the stock libdat2 and `libdat_capi.so` on IA `rxe0`, its client under callgrind, in one VM run
# of ../shared/rxe-vm; then, per build, the inclusive instructions per call of the provider
# table's post and dequeue entries (callgrind_annotate on the host).
#
#   dat-capi/tests/rxe-callgrind.sh before=DIR after=DIR ofa
#       # each DIR holds a libdat_capi.so (cargo build --release -p dat-capi --features dat/verbs),
#       # inside the checkout; `ofa` profiles OFA dapl's `ofa-v2-rxe` the same way
#
# libdat2's entries (`dat_ep_post_rdma_write`, `dat_evd_dequeue`) compare with OFA's.
#
# valgrind comes from the host (`apt-get install valgrind`; the guest runs the host's Debian
# release): its launcher and tools are copied under the output directory. Environment:
# RXE_VM (the rxe-vm script), RXE_CG_ITERS (operations, default 2000). Output:
# target/rxe-callgrind/.
set -euo pipefail
# shellcheck source=../../scripts/rxe-bench-lib.sh
. "$(dirname "$0")/../../scripts/rxe-bench-lib.sh"

if [ "${1:-}" = --guest ]; then
    shift
    out=$1 iters=$2 vg=$3
    shift 3
    export DAT_CONF=$PWD/dat-provider-verbs/tests/rxe.toml VALGRIND_LIB=$out/vglib
    for pair in "$@"; do
        l=${pair%%=*} d=${pair#*=} ia=rs-verbs
        conf="$out/$l-dat.conf"
        if [ "$l" = ofa ]; then
            ia=ofa-v2-rxe conf=
        else
            printf 'rs-verbs u2.0 nonthreadsafe default %s dat.2.0 "rxe0" ""\n' "$d/libdat_capi.so" >"$conf"
        fi
        (
            [ -n "$conf" ] && export DAT_OVERRIDE=$conf
            taskset -c 0 timeout 900 dapltest -T S -D "$ia" >"$out/$l-srv.log" 2>&1 &
            s=$!
            sleep 2
            taskset -c 1 timeout 900 "$vg" --tool=callgrind --callgrind-out-file="$out/$l.callgrind" \
                dapltest -T P -s "$RXE_IP" -D "$ia" -i "$iters" -p 1 -m p RW 2 1 \
                >"$out/$l-client.log" 2>&1 || echo "dapltest $l failed" >&2
            timeout 30 dapltest -T Q -s "$RXE_IP" -D "$ia" >/dev/null 2>&1 || true
            wait $s || true
        )
    done
    exit 0
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
vm=$(rxe_vm rxe-callgrind)
[ -x /usr/bin/valgrind.bin ] && [ -d /usr/libexec/valgrind ] \
    || { echo "rxe-callgrind: needs the host's valgrind (apt-get install valgrind)" >&2; exit 2; }
out="$root/target/rxe-callgrind"
mkdir -p "$out"
cp /usr/bin/valgrind.bin "$out/valgrind"
rm -rf "$out/vglib"
cp -r /usr/libexec/valgrind "$out/vglib"
iters=${RXE_CG_ITERS:-2000}
pairs=()
for a in "$@"; do
    [ "$a" = ofa ] && { pairs+=(ofa=); continue; }
    d=$(cd "${a#*=}" && pwd)
    [ -f "$d/libdat_capi.so" ] || { echo "rxe-callgrind: no $d/libdat_capi.so" >&2; exit 2; }
    case $d in "$root"/*) ;; *) echo "rxe-callgrind: $d is outside $root" >&2; exit 2 ;; esac
    pairs+=("${a%%=*}=$d")
done
"$vm" --timeout 1800 --share "$root" \
    --env RUST_LOG="${RUST_LOG:-warn}" \
    -- "$root/dat-capi/tests/rxe-callgrind.sh" --guest "$out" "$iters" "$out/valgrind" "${pairs[@]}"
# Inclusive instructions per call of the entries a dapltest P client calls per operation, and
# of the core's calls under them (the difference is this crate's own cost). callgrind_annotate
# --tree=caller prints blocks: the callers ("<", with "(Nx)" calls), the function ("*"), blank.
for pair in "${pairs[@]}"; do
    l=${pair%%=*}
    f="$out/$l.callgrind"
    [ -s "$f" ] || { echo "$l: no profile" >&2; continue; }
    callgrind_annotate --inclusive=yes --tree=caller --threshold=100 "$f" >"$out/$l.annotate" 2>/dev/null
    echo "$l ($iters operations): $(grep -m1 'PROGRAM TOTALS' "$out/$l.annotate")"
    perl -e '
        my @want = @ARGV; my %best; my $calls = 0;
        while (<STDIN>) {
            if (/^\s*$/) { $calls = 0; next }
            if (/^\s*([\d,]+)\s+\([^)]*\)\s+<.*\(([\d,]+)x\)/) { (my $c = $2) =~ s/,//g; $calls += $c; next }
            if (/^\s*([\d,]+)\s+\([^)]*\)\s+\*\s+\S*?:(.*?)(?: \[.*\])?$/) {
                my ($ir, $fn) = ($1, $2); $ir =~ s/,//g;
                for my $w (@want) {
                    next unless $fn eq $w && $calls > 0;
                    $best{$w} = [$ir, $calls] if !$best{$w} || $ir > $best{$w}[0];
                }
            }
        }
        for my $w (@want) {
            my ($ir, $c) = @{ $best{$w} || [0, 0] };
            printf "  %-58s %10d Ir %7d calls %7.0f Ir/call\n", $w, $ir, $c, $c ? $ir / $c : 0;
        }
    ' 'dat_ep_post_rdma_write' 'dat_evd_dequeue' \
      'dat_capi::calls::ep::ep_post_rdma_write' \
      'dat::ep_post::<impl dat::ep::Ep>::post_rdma_write' \
      'dat_capi::calls::evd::evd_dequeue' \
      'dat::evd::Evd::dequeue' \
      'dat_capi::calls::convert::event_to_c' \
      'dat_capi::handle::get' <"$out/$l.annotate"
done
