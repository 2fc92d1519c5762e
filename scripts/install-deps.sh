#!/usr/bin/env bash
# Installs the system packages the build and the tests need, on a fresh Debian machine (as root,
# or with sudo). Idempotent: already-installed packages are skipped quickly.
set -euo pipefail

PACKAGES=(
  pkg-config
  iproute2      # network namespaces for the cross-host tests
  libdapl-dev   # dat2 headers: dat-capi layout tests and C programs
  libdapl2      # the stock libdat2 registry dat-capi plugs into
  dapl2-utils   # dtest/dapltest for dat-capi/tests/stock-suite.sh
  # dat-provider-verbs (a workspace member, built by clippy/doc/test): rdma-sys runs bindgen
  # over the rdma-core headers and links libibverbs + librdmacm.
  libibverbs-dev
  librdmacm-dev
  libclang-dev  # bindgen's libclang
  clang         # clang's own headers (stddef.h) for bindgen
  jq            # dat-provider-verbs/tests/rxe-suite.sh reads cargo's JSON to find the test binary
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
apt_get() {
  # Wait for other apt users instead of failing; retry once on a transient error.
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 "$@" ||
    { sleep 10; $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 "$@"; }
}
apt_get update -qq
apt_get install -y -qq --no-install-recommends "${missing[@]}"
