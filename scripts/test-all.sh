#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Build first: the C ABI tests load target/debug/libdat_capi.so, which `cargo test` alone does
# not produce.
cargo build --workspace --all-features
cargo test --workspace --all-features
# The unmodified uDAPL test programs (dtest, dtestcm, dtestsrq, dapltest) through the stock
# libdat2 on the tcp and shm IAs, judged against dat-capi/tests/stock-xfail.txt.
dat-capi/tests/stock-suite.sh
# The verbs provider on a real verbs device: the short conformance subset (connect, private data,
# reject, send/recv, RDMA write/read, disconnect) on Soft-RoCE in a throwaway VM (about 50 s the
# first time on a fresh machine, which builds the VM image; under 30 s after). The full suite:
# dat-provider-verbs/tests/rxe-suite.sh without --short.
dat-provider-verbs/tests/rxe-suite.sh --short
# The same unmodified uDAPL programs on the verbs provider against Soft-RoCE in the VM (23
# checks, about 2-5 min with the VM boot and a release build of libdat_capi.so with verbs).
dat-provider-verbs/tests/rxe-stock.sh
