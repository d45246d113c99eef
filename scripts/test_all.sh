#!/usr/bin/env bash
# Sets up from a bare machine and runs the whole test suite (this is what .ci/run calls).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
cd "$root/build"
ctest --output-on-failure -j "$(nproc)" --timeout 900
