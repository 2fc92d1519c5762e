#!/usr/bin/env bash
# Runs scripts/tcg-costs.c (the cost of one instruction of each kind) on this host and then in
# the Soft-RoCE VM of ../shared/rxe-vm (TCG on this machine), so that instruction counts of a
# path (scripts/rxe-callgrind.sh) can be weighed by kind. Environment: RXE_VM. Output:
# target/tcg-costs/.
set -euo pipefail
# shellcheck source=rxe-bench-lib.sh
. "$(dirname "$0")/rxe-bench-lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=target/tcg-costs
mkdir -p "$out"
cc -O2 -Wall -o "$out/tcg-costs" scripts/tcg-costs.c
echo "host:  $("$out/tcg-costs")"
vm=$(rxe_vm tcg-costs)
echo "guest: $("$vm" --timeout 600 -- "$root/$out/tcg-costs" 2>/dev/null)"
