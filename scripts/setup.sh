#!/usr/bin/env bash
# Sets mactor up on a bare Debian 12 machine: system packages, the Python reference venv, and the build.
# Usage: scripts/setup.sh [--no-python] [--build-dir DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="$root/build"
with_python=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-python) with_python=0 ;;
    --build-dir) build_dir=$2; shift ;;
    *) echo "setup.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

packages=(build-essential cmake ninja-build ccache pkg-config git python3 python3-venv python3-numpy python3-torch
  libcaf-dev libucx-dev ucx-utils libcxxopts-dev libspdlog-dev catch2 libopenblas-dev
  openmpi-bin libopenmpi-dev nlohmann-json3-dev libre2-dev libcpp-httplib-dev libsentencepiece-dev chromium
  iproute2 procps)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$with_python" = 1 ]; then
  # Independent references for the tests: Debian's PyTorch plus PyPI packages, in a venv of our own.
  venv="$root/.venv"
  if [ ! -x "$venv/bin/python" ]; then
    /usr/bin/python3 -m venv --system-site-packages "$venv"
  fi
  stamp="$venv/.requirements"
  wanted=$(cat "$root/scripts/requirements-test.txt" "$root/scripts/requirements-test-nodeps.txt")
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/scripts/requirements-test.txt"
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$root/scripts/requirements-test-nodeps.txt"
    printf '%s' "$wanted" > "$stamp"
  fi
fi

# ccache outside the clone, keyed on paths relative to it, so a fresh clone reuses earlier builds.
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
