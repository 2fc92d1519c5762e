# Shell functions shared by the Soft-RoCE benchmark scripts (sourced, not run):
# dat-provider-verbs/tests/rxe-lat.sh, dat-capi/tests/rxe-dapltest-p.sh, rxe-dapltest-t.sh and
# scripts/rxe-callgrind.sh.

# rxe_vm NAME: prints the rxe-vm script to use ($RXE_VM, else ../shared/rxe-vm/rxe-vm beside the
# checkout in $root, else /work/shared/rxe-vm/rxe-vm); without one, says so as NAME and exits 125
# (the "skipped" code of the test scripts).
rxe_vm() {
    local vm=${RXE_VM:-$root/../shared/rxe-vm/rxe-vm}
    [ -x "$vm" ] || vm=/work/shared/rxe-vm/rxe-vm
    [ -x "$vm" ] || { echo "$1: no rxe-vm (set RXE_VM)" >&2; exit 125; }
    echo "$vm"
}

# Every benchmark boots its guest with `tsc=reliable` unless RXE_VM_APPEND is set (to anything,
# empty included; exported when this file is sourced, since rxe_vm runs in a subshell): under
# TCG the guest kernel's clocksource watchdog marks the emulated TSC unstable once both vCPUs
# are busy (about 8 s after boot in a benchmark) and switches to the emulated HPET, after
# which every clock read is a system call (`clock_gettime` 1.0 us in the guest, against
# 0.08 us through the vDSO on the TSC; getrusage 1.1 us either way). A benchmark's figures
# then depend on how often each program reads the clock (ours: the facade's pacer, one look
# per 32 empty polls), which real hardware with an invariant TSC does not charge for.
export RXE_VM_APPEND=${RXE_VM_APPEND-tsc=reliable}

# median: the median of the numbers given as arguments (the mean of the middle two for an even
# count).
median() {
    printf '%s\n' "$@" | sort -g \
        | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# upper_quartile: the 75th percentile of the numbers given as arguments (linear between the
# two nearest ranks). Soft-RoCE's rounds are bimodal (see dat-provider-verbs/README.md,
# session 13): with a quarter or more of the rounds in the fast mode, this is a figure of it.
upper_quartile() {
    printf '%s\n' "$@" | sort -g \
        | awk '{ a[NR] = $1 } END { h = (NR - 1) * 0.75 + 1; i = int(h); f = h - i
            print (i < NR) ? a[i] + f * (a[i + 1] - a[i]) : a[i] }'
}

# rxe_dapltest_run LOG IA ITERS CONF PIPELINE SIZE [PRELOAD] (inside the guest): `dapltest -T P`
# RW of SIZE bytes, one segment, polling, PIPELINE operations outstanding, on IA (with
# DAT_OVERRIDE=CONF unless CONF is empty), server on vCPU 0 and client on vCPU 1 (as perftest
# is run), the client with LD_PRELOAD=PRELOAD if given; logs to LOG.log and LOG.srv.log.
rxe_dapltest_run() {
    local log=$1 ia=$2 iters=$3 conf=$4 pipeline=$5 size=$6 preload=${7:-}
    (
        [ -n "$conf" ] && export DAT_OVERRIDE=$conf
        taskset -c 0 timeout 120 dapltest -T S -D "$ia" >"$log.srv.log" 2>&1 &
        s=$!
        sleep 2
        LD_PRELOAD=$preload taskset -c 1 timeout 120 dapltest -T P -s "$RXE_IP" -D "$ia" -i "$iters" -p "$pipeline" \
            -m p RW "$size" 1 >"$log.log" 2>&1 || echo "dapltest on $ia failed ($log.log)" >&2
        timeout 30 dapltest -T Q -s "$RXE_IP" -D "$ia" >/dev/null 2>&1 || true
        wait $s || true
    )
}

# rxe_dapltest_p LOG IA ITERS [DAT_OVERRIDE] (inside the guest): rxe_dapltest_run of RW 2 B, one
# operation outstanding. Prints the operations per second, nothing if the run failed.
rxe_dapltest_p() {
    rxe_dapltest_run "$1" "$2" "$3" "${4:-}" 1 2
    grep -a 'Operation Throughput' "$1.log" | grep -oE '[0-9]+(\.[0-9]+)?' | head -n 1 || true
}

# rxe_capi_conf OUT LABEL DIR (inside the guest): writes OUT/LABEL-dat.conf, a libdat2 registry
# whose IA `rs-verbs` is DIR's libdat_capi.so serving dat IA `rxe0`, and prints its path (for
# DAT_OVERRIDE).
rxe_capi_conf() {
    printf 'rs-verbs u2.0 nonthreadsafe default %s dat.2.0 "rxe0" ""\n' "$3/libdat_capi.so" \
        >"$1/$2-dat.conf"
    echo "$1/$2-dat.conf"
}

# rxe_rotate OUT ROUNDS RUN [LABEL=DIR...] (inside the guest): ROUNDS rounds over OFA dapl's
# `ofa-v2-rxe` and each LABEL's libdat_capi.so (IA `rs-verbs`, through a registry written by
# rxe_capi_conf), in an order that rotates every round, calling `RUN LABEL IA ROUND
# [DAT_OVERRIDE]` for each (label `ofa` without an override).
rxe_rotate() {
    local out=$1 rounds=$2 run=$3 pair l e conf n r i
    shift 3
    local runs=("ofa=")
    for pair in "$@"; do
        l=${pair%%=*}
        runs+=("$l=$(rxe_capi_conf "$out" "$l" "${pair#*=}")")
    done
    n=${#runs[@]}
    for r in $(seq "$rounds"); do
        for i in $(seq 0 $((n - 1))); do
            e=${runs[$(((i + r) % n))]}
            l=${e%%=*} conf=${e#*=}
            if [ "$l" = ofa ]; then "$run" ofa ofa-v2-rxe "$r"; else "$run" "$l" rs-verbs "$r" "$conf"; fi
        done
    done
}

# rxe_medians RESULTS (inside the guest): for each label and measure of RESULTS (lines of
# `LABEL MEASURE VALUE`), the median of its values, then the values.
rxe_medians() {
    awk '{ k = $1 " " $2; v[k] = v[k] " " $3 } END { for (k in v) print k, v[k] }' "$1" \
        | sort | while read -r l m vals; do
            # shellcheck disable=SC2086 # the values: words on purpose
            printf '  %-8s %-26s %10s   (%s)\n' "$l" "$m" "$(median $vals)" "$(echo $vals)"
        done
}

# rxe_lat_ratios RESULTS (inside the guest): rxe-lat.sh's paired figures, from lines of
# `LABEL MEASURE VALUE ROUND`: per label, the median over rounds of each round's ratio to the
# reference measured in the same round (the VM's speed drifts between rounds and sittings, so
# a ratio of two medians can pair a fast round of one with a slow round of the other):
# datperf's send/recv and RDMA write to perftest's t_avg (lower is better), dapltest to OFA's
# (higher is better), with each ratio's smallest and largest round.
rxe_lat_ratios() {
    local res=$1
    echo "median per-round ratio (min-max) to the reference of the same round:"
    awk '{ v[$1 " " $2 " " $4] = $3; l[$1] = 1; r[$4] = 1 }
        END {
            split("datperf-send-recv perftest ib_send_lat-t_avg|datperf-rdma-write perftest ib_write_lat-t_avg|dapltest-P-RW2-ops/s ofa dapltest-P-RW2-ops/s", p, "|")
            for (lab in l) {
                if (lab == "perftest" || lab == "ofa") continue
                for (i = 1; i in p; i++) {
                    split(p[i], q, " ")
                    n = 0
                    for (k in r) {
                        a = lab " " q[1] " " k; b = q[2] " " q[3] " " k
                        if ((a in v) && (b in v) && v[b] > 0) print lab, q[1] "/" q[2], v[a] / v[b]
                    }
                }
            }
        }' "$res" | sort -k1,2 -k3g | awk '
        { k = $1 " " $2; n[k]++; x[k, n[k]] = $3 }
        END {
            for (k in n) {
                c = n[k]
                m = (c % 2) ? x[k, (c + 1) / 2] : (x[k, c / 2] + x[k, c / 2 + 1]) / 2
                split(k, w, " ")
                printf "  %-8s %-32s %6.3f   (%.3f-%.3f, %d rounds)\n", w[1], w[2], m, x[k, 1], x[k, c], c
            }
        }' | sort
}

# rxe_round_diffs RESULTS REF (inside the guest): from lines of `LABEL MEASURE VALUE ROUND`, per
# label other than REF and measure, the median over rounds of each round's value less REF's in
# the same round, with the number of rounds paired.
rxe_round_diffs() {
    awk -v ref="$2" '{ v[$1 " " $2 " " $4] = $3; l[$1] = 1; m[$2] = 1; r[$4] = 1 }
        END {
            for (lab in l) {
                if (lab == ref) continue
                for (me in m) for (k in r) {
                    a = lab " " me " " k; b = ref " " me " " k
                    if ((a in v) && (b in v)) print lab, me, v[a] - v[b]
                }
            }
        }' "$1" | sort -k1,2 -k3g | awk '
        { k = $1 " " $2; n[k]++; x[k, n[k]] = $3 }
        END {
            for (k in n) {
                c = n[k]
                d = (c % 2) ? x[k, (c + 1) / 2] : (x[k, c / 2] + x[k, c / 2 + 1]) / 2
                split(k, w, " ")
                printf "  %-8s %-22s %+10g   (%d rounds)\n", w[1], w[2], d, c
            }
        }' | sort
}

# rxe_modes RESULTS (inside the guest): the rounds of `dapltest -T P` under TCG are bimodal
# (each run lands near one of two rates, whatever the library: the VM's state, not the code),
# so a median follows how many of a label's rounds happen to land in the fast mode. This splits
# all the values of RESULTS (lines of `LABEL VALUE ROUND`) into the two modes (the split of the
# sorted values with the least squared deviation from the two means) and prints, per label, the
# rounds and the median in each mode, then each label's median per-round ratio to `ofa` (the
# two ran next to each other in that round).
rxe_modes() {
    local res=$1 cut l
    cut=$(awk '{ print $2 }' "$res" | sort -g | awk '{ a[NR] = $1; t += $1; q += $1 * $1 }
        END {
            best = -1; l = 0; lq = 0
            for (k = 1; k < NR; k++) {
                l += a[k]; lq += a[k] * a[k]
                r = t - l; rq = q - lq
                sse = (lq - l * l / k) + (rq - r * r / (NR - k))
                if (best < 0 || sse < best) { best = sse; c = (a[k] + a[k + 1]) / 2 }
            }
            print (best < 0) ? 0 : c
        }')
    echo "  modes split at $cut ops/s: label, slow rounds and median, fast rounds and median, median ratio to ofa per round"
    awk '{ print $1 }' "$res" | sort -u | while read -r l; do
        # shellcheck disable=SC2207 # numbers: words on purpose
        local slow=($(awk -v l="$l" -v c="$cut" '$1 == l && $2 < c { print $2 }' "$res"))
        # shellcheck disable=SC2207
        local fast=($(awk -v l="$l" -v c="$cut" '$1 == l && $2 >= c { print $2 }' "$res"))
        # shellcheck disable=SC2207
        local ratios=($(awk -v l="$l" '$1 == l { v[$3] = $2 } $1 == "ofa" { o[$3] = $2 }
            END { for (r in v) if (r in o && o[r] > 0) printf "%.3f\n", v[r] / o[r] }' "$res"))
        printf '  %-8s %3d %10s %3d %10s   %s\n' "$l" "${#slow[@]}" \
            "$([ ${#slow[@]} -gt 0 ] && median "${slow[@]}" || echo -)" "${#fast[@]}" \
            "$([ ${#fast[@]} -gt 0 ] && median "${fast[@]}" || echo -)" \
            "$([ "$l" != ofa ] && [ ${#ratios[@]} -gt 0 ] && median "${ratios[@]}" || echo -)"
    done
}

# rxe_datperf_pairs NAME OUT [LABEL=DIR...] (on the host, in the checkout $root): prints the
# LABEL=ABSDIR pairs to measure, one per line, each DIR holding a release `datperf` and
# `libdat_capi.so`; with none given, builds this checkout's into OUT/this (label "this").
rxe_datperf_pairs() {
    local name=$1 out=$2 a
    shift 2
    if [ $# -eq 0 ]; then
        cargo build -q --release -p dat-perf --features verbs >&2
        cargo build -q --release -p dat-capi --features dat/verbs >&2
        mkdir -p "$out/this"
        cp target/release/datperf target/release/libdat_capi.so "$out/this/"
        echo "this=$out/this"
        return
    fi
    for a in "$@"; do
        rxe_pair "$name" "$a" datperf libdat_capi.so || exit 2
    done
}

# rxe_pair NAME LABEL=DIR FILE... (on the host): prints LABEL=ABSDIR once DIR holds every FILE
# and lies inside the checkout $root (the only tree shared with the VM); else says so as NAME
# and exits 2.
rxe_pair() {
    local name=$1 a=$2 d f
    shift 2
    case $a in *=*) ;; *) echo "$name: expected LABEL=DIR, got $a" >&2; exit 2 ;; esac
    d=$(cd "${a#*=}" && pwd) || exit 2
    for f in "$@"; do
        [ -f "$d/$f" ] || { echo "$name: no $d/$f" >&2; exit 2; }
    done
    case $d in "$root"/*) ;; *) echo "$name: $d is outside $root (not shared with the VM)" >&2; exit 2 ;; esac
    echo "${a%%=*}=$d"
}

# rxe_bench_host NAME SCRIPT N PARAM... [LABEL=DIR...] (on the host, in the checkout $root): the
# host side of a datperf benchmark script: the builds to measure (rxe_datperf_pairs), then
# SCRIPT in one VM run as `SCRIPT --guest OUT PARAM... LABEL=DIR...` (the N PARAMs first), OUT
# being target/NAME. Does not return.
rxe_bench_host() {
    rxe_host datperf "$1" "$2" 1800 "${@:3}"
}

# rxe_capi_host NAME SCRIPT TIMEOUT N PARAM... [LABEL=DIR...] (on the host, in the checkout
# $root): the same for a libdat_capi.so benchmark script: each LABEL's DIR must hold a
# libdat_capi.so inside the checkout; the VM run lasts at most TIMEOUT seconds.
rxe_capi_host() {
    rxe_host capi "$@"
}

# rxe_host KIND NAME SCRIPT TIMEOUT N PARAM... [LABEL=DIR...]: rxe_bench_host (KIND datperf) and
# rxe_capi_host (KIND capi).
rxe_host() {
    local kind=$1 name=$2 script=$3 timeout=$4 n=$5 vm out a
    shift 5
    local params=("${@:1:n}")
    shift "$n"
    vm=$(rxe_vm "$name")
    out="$root/target/$name"
    mkdir -p "$out"
    local pairs=()
    if [ "$kind" = capi ]; then
        for a in "$@"; do
            pairs+=("$(rxe_pair "$name" "$a" libdat_capi.so)") || exit 2
        done
    else
        mapfile -t pairs < <(rxe_datperf_pairs "$name" "$out" "$@")
        [ ${#pairs[@]} -eq $(($# > 0 ? $# : 1)) ] || exit 2
    fi
    exec "$vm" --timeout "$timeout" --env RUST_LOG="${RUST_LOG:-warn}" \
        -- "$script" --guest "$out" "${params[@]}" "${pairs[@]}"
}

# rxe_bench_rounds NAME ROUNDS OUT DATPERF PERFTEST DAPLTEST PROG1 PROG2 LABEL=DIR... (inside the
# guest): ROUNDS rounds of one benchmark, each measuring in turn every build with the function
# DATPERF (`DATPERF LABEL DIR ROUND`), perftest's PROG1 and PROG2 with PERFTEST (`PERFTEST PROG
# ROUND`), then OFA dapl and every build with DAPLTEST (`DAPLTEST LABEL IA ROUND [CONF]`, CONF
# the build's DAT_OVERRIDE file written under OUT).
rxe_bench_rounds() {
    local name=$1 rounds=$2 out=$3 datperf=$4 perftest=$5 dapltest=$6 p1=$7 p2=$8 r pair
    shift 8
    for r in $(seq "$rounds"); do
        echo "$name: round $r" >&2
        for pair in "$@"; do
            "$datperf" "${pair%%=*}" "${pair#*=}" "$r"
        done
        "$perftest" "$p1" "$r"
        "$perftest" "$p2" "$r"
        "$dapltest" ofa ofa-v2-rxe "$r"
        for pair in "$@"; do
            "$dapltest" "${pair%%=*}" rs-verbs "$r" "$(rxe_capi_conf "$out" "${pair%%=*}" "${pair#*=}")"
        done
    done
}

# rxe_datperf_run OUT LABEL DIR ROUND TAG TIMEOUT ARG... (inside the guest): DIR's `datperf
# server` on vCPU 0 and `datperf client` with ARGs on vCPU 1, on IA `rxe0`, waiting at most
# TIMEOUT seconds for any event; the client's JSON goes to OUT/LABEL-TAG-ROUND.json.
rxe_datperf_run() {
    local out=$1 l=$2 d=$3 r=$4 tag=$5 t=$6 s
    shift 6
    taskset -c 0 "$d/datperf" server --ia rxe0 --once --timeout-s "$t" \
        >"$out/$l-srv-$r.log" 2>&1 &
    s=$!
    sleep 1
    taskset -c 1 "$d/datperf" client 127.0.0.1 --ia rxe0 --budget-ms 600000 --timeout-s "$t" \
        --json "$@" >"$out/$l-$tag-$r.json" 2>"$out/$l-$tag-$r.err" ||
        echo "datperf $l failed (round $r)" >&2
    wait $s || true
}

# rxe_perftest_run OUT PROG ROUND ARG... (inside the guest): perftest's PROG with ARGs on rxe0,
# server on vCPU 0, client on vCPU 1; the client's output goes to OUT/PROG-ROUND.log.
rxe_perftest_run() {
    local out=$1 p=$2 r=$3 s
    shift 3
    taskset -c 0 "$p" -d rxe0 -x "$RXE_GID_INDEX" "$@" >"$out/$p-srv-$r.log" 2>&1 &
    s=$!
    sleep 1
    taskset -c 1 "$p" -d rxe0 -x "$RXE_GID_INDEX" "$@" "$RXE_IP" >"$out/$p-$r.log" 2>&1 ||
        echo "$p failed (round $r)" >&2
    wait $s || true
}
