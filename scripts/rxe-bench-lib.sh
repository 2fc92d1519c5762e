# Shell functions shared by the Soft-RoCE benchmark scripts (sourced, not run):
# dat-provider-verbs/tests/rxe-lat.sh and rxe-callgrind.sh, dat-capi/tests/rxe-dapltest-p.sh and
# rxe-callgrind.sh.

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
