# Shell functions shared by the Soft-RoCE benchmark scripts (sourced, not run):
# dat-provider-verbs/tests/rxe-lat.sh, dat-capi/tests/rxe-dapltest-p.sh and
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

# median: the median of the numbers given as arguments (the mean of the middle two for an even
# count).
median() {
    printf '%s\n' "$@" | sort -g \
        | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# rxe_dapltest_p LOG IA ITERS [DAT_OVERRIDE] (inside the guest): `dapltest -T P` RW 2 B, one
# segment, polling, on IA, server on vCPU 0 and client on vCPU 1 (as perftest is run); logs to
# LOG.log and LOG.srv.log. Prints the operations per second, nothing if the run failed.
rxe_dapltest_p() {
    local log=$1 ia=$2 iters=$3 conf=${4:-}
    (
        [ -n "$conf" ] && export DAT_OVERRIDE=$conf
        taskset -c 0 timeout 120 dapltest -T S -D "$ia" >"$log.srv.log" 2>&1 &
        s=$!
        sleep 2
        taskset -c 1 timeout 120 dapltest -T P -s "$RXE_IP" -D "$ia" -i "$iters" -p 1 -m p \
            RW 2 1 >"$log.log" 2>&1 || echo "dapltest on $ia failed ($log.log)" >&2
        timeout 30 dapltest -T Q -s "$RXE_IP" -D "$ia" >/dev/null 2>&1 || true
        wait $s || true
    )
    grep -a 'Operation Throughput' "$log.log" | grep -oE '[0-9]+(\.[0-9]+)?' | head -n 1 || true
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
