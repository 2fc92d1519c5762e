#!/usr/bin/env bash
# Runs the stock uDAPL programs (dtest, dtestcm, dtestsrq, dapltest through Debian's libdat2)
# on our verbs provider against Soft-RoCE (rxe0) in the throwaway VM of ../shared/rxe-vm:
# builds libdat_capi.so with the verbs provider on the host, then runs
# dat-capi/tests/stock-suite.sh in the VM on the IA rs-verbs only (dat IA `rxe0` of
# dat-provider-verbs/tests/rxe.toml, clients connecting to the device's $RXE_IP). The bulk
# checks run with smaller sizes there (emulated CPU; see "Sizes" in stock-suite.sh). All 23
# checks pass, about 3-5 min with the VM boot.
#
#   dat-provider-verbs/tests/rxe-stock.sh
#   STOCK_ONLY='dtest$' dat-provider-verbs/tests/rxe-stock.sh   # a subset (see stock-suite.sh)
#
# Environment: RXE_VM (the rxe-vm script; default ../shared/rxe-vm/rxe-vm beside the checkout,
# else /work/shared/rxe-vm/rxe-vm), RXE_STOCK_TIMEOUT (seconds for the whole VM, default 2400),
# STOCK_ONLY, STOCK_TIMEOUT, STOCK_TIMEOUT_LONG (passed to stock-suite.sh). Exit status: the
# suite's; 124 when the VM ran out of time, 125 when the VM could not run.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
vm=${RXE_VM:-$root/../shared/rxe-vm/rxe-vm}
[ -x "$vm" ] || vm=/work/shared/rxe-vm/rxe-vm
if [ ! -x "$vm" ]; then
    echo "rxe-stock: no rxe-vm (set RXE_VM)" >&2
    exit 125
fi
# The verbs provider is a feature of the dat crate, which dat-capi links.
cargo build -q --release -p dat-capi --features dat/verbs
# A private copy: a later plain build (without verbs) rewrites target/release/libdat_capi.so.
# The suite's logs go there too (the guest's /tmp does not outlive the VM); a passing run
# removes its own.
out="$root/target/rxe-stock"
mkdir -p "$out"
so="$out/libdat_capi.so"
cp "$root/target/release/libdat_capi.so" "$so"
envs=()
for v in STOCK_ONLY STOCK_TIMEOUT STOCK_TIMEOUT_LONG; do
    [ -n "${!v:-}" ] && envs+=(--env "$v=${!v}")
done
echo "rxe-stock: $so in the VM" >&2
# RXE_IP is set in the guest only, hence the inner shell.
exec "$vm" --timeout "${RXE_STOCK_TIMEOUT:-2400}" \
    --env DATCAPI_SO="$so" --env STOCK_IAS=rs-verbs --env TMPDIR="$out" \
    --env STOCK_DAT_CONF="$root/dat-provider-verbs/tests/rxe.toml" \
    --env RUST_LOG="${RUST_LOG:-warn}" "${envs[@]}" \
    -- bash -c 'STOCK_HOST=$RXE_IP exec dat-capi/tests/stock-suite.sh'
