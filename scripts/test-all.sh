#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo test --workspace --all-features
