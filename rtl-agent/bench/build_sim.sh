#!/bin/sh
# Builds the ROCm simulator and the workloads, as committed (HEAD), into target/rtl-agent-sim/:
# their owners edit and rebuild tests/rocm-sim and tests/workloads in the shared tree at any
# time, so rtl-agent's tests and bench use a consistent snapshot. Incremental: the sources are
# re-exported only when the committed trees change. Prints the build directory.
#   rtl-agent/bench/build_sim.sh [sim-only]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/target/rtl-agent-sim
mkdir -p "$B"
TREES="$(git -C "$ROOT" rev-parse HEAD:tests/rocm-sim HEAD:tests/workloads | tr '\n' ' ')"
if [ "$(cat "$B/src.stamp" 2>/dev/null)" != "$TREES" ]; then
  rm -rf "$B/src.new" && mkdir -p "$B/src.new"
  git -C "$ROOT" archive HEAD tests/rocm-sim tests/workloads | tar -x -C "$B/src.new"
  rm -rf "$B/src" && mv "$B/src.new" "$B/src"
  echo "$TREES" > "$B/src.stamp"
fi
make -s -C "$B/src/tests/rocm-sim" BUILD="$B/rocm-sim" >&2
if [ "${1:-}" != sim-only ]; then
  make -s -C "$B/src/tests/workloads" BUILD="$B/workloads" >&2
fi
echo "$B"
