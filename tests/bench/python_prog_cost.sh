#!/bin/bash
# In-kernel cost of Python frames per launch (bpf_stats): the probes' run time per call (entry + return)
# of the python-stack-cost driver (hipLaunchKernel through ctypes from DEPTH + 3 Python frames) under
# `--stacks dwarf` and `--stacks dwarf --no-python-frames`, for one or more collector binaries,
# interleaved rounds, medians. Wall time on a shared machine is noise; this is the figure.
# Usage (root): tests/bench/python_prog_cost.sh ROUNDS BIN [BIN...]   (needs target/bench/librtlbench.so:
# `cargo xtask bench stack-cost` builds it) -- e.g. compare a build of main with this branch's.
set -euo pipefail
ROUNDS=$1; shift
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LIB=${LIB:-$ROOT/target/bench/librtlbench.so}
CALLS=${CALLS:-100000}
# Nesting of the driver's Python functions (frames at each launch: DEPTH + 3, + runpy's).
DEPTH=${DEPTH:-8}
# --stacks mode (dwarf: the stack copy's cost is in both columns; fp: less of it; python: the
# baseline column is --stacks off, so the difference is all python mode adds).
STACKS=${STACKS:-dwarf}
[ -e "$LIB" ] || { echo "no $LIB: run cargo xtask bench stack-cost once" >&2; exit 1; }
TMP=$(mktemp -d)
was=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -q -w kernel.bpf_stats_enabled=1
C=
cleanup() { [ -n "$C" ] && kill -INT "$C" 2>/dev/null && wait "$C" 2>/dev/null; sysctl -q -w kernel.bpf_stats_enabled="$was"; rm -rf "$TMP"; }
trap cleanup EXIT
# (run_time_ns, run_cnt) summed over the collector's own program fds (fdinfo: no bpftool needed).
prog_stats() { for f in /proc/$1/fdinfo/*; do awk '/^run_time_ns:/{t=$2} /^run_cnt:/{n=$2} END {if (n > 0) print t, n}' "$f" 2>/dev/null; done; }
# The driver, after 2 s: the collector describes a process to the probe when it reads its
# mappings (at a rescan, each second, for a library given with --lib), so every timed call is walked.
WAIT_THEN_DRIVE='import runpy, sys, time; time.sleep(2); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name="__main__")'
one() { # BIN ARGS... -> entry + return ns per call
  # `run`: the collector describes the Python process to the probe before it runs (under --all
  # a process started later is described only at a rescan, after most of its calls).
  local bin=$1; shift
  local stacks=(--stacks "$STACKS")
  # --stacks python has no native stack to keep without Python frames: its baseline is no stacks.
  if [ "${1:-}" = --no-python-frames ] && [ "$STACKS" = python ]; then stacks=(--stacks off); shift; fi
  # The collector on the other CPU: a uprobe program can be preempted, and time the driver
  # CPU spends in the collector would count as program time.
  taskset -c 0 "$bin" run --apis hipLaunchKernel --lib "$LIB" --gpu none --quiet --force "${stacks[@]}" "$@" -o "$TMP/t.db" -- \
    taskset -c 1 "${PYTHON:-python3}" -c "$WAIT_THEN_DRIVE" "$ROOT/tests/bench/py_launch_driver.py" "$LIB" "$CALLS" "$DEPTH" 3 >"$TMP/out" 2>"$TMP/err" &
  C=$!
  for _ in $(seq 1 600); do grep -q ns_per_call "$TMP/out" && break; sleep 0.1; done
  prog_stats $C | awk '{t += $1; n += $2} END {printf "%.1f\n", t / (n > 0 ? n / 2 : 1)}'
  wait $C || { cat "$TMP/err" >&2; exit 1; }
  C=
  [ "${1:-}" = --no-python-frames ] || [ "${stacks[1]}" = off ] || [ "$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT value FROM rocpd_metadata WHERE tag = ?", ("python_stack_records",)).fetchone()[0])' "$TMP/t.db")" -gt 0 ] \
    || { echo "no Python frames were walked" >&2; exit 1; }
}
declare -A R
for ((r = 0; r < ROUNDS; r++)); do
  for b in "$@"; do
    R["$b py"]+="$(one "$b") "
    R["$b nopy"]+="$(one "$b" --no-python-frames) "
  done
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "python-prog-cost: probe ns per call, entry + return (bpf_stats), $CALLS calls from $((DEPTH + 3)) Python frames (+ runpy's) x $ROUNDS interleaved rounds, medians"
for b in "$@"; do
  py=$(echo "${R["$b py"]}" | med); no=$(echo "${R["$b nopy"]}" | med)
  echo "  $b: --stacks $STACKS $py ns; --no-python-frames $no ns; Python frames add $(python3 -c "print('%+.1f' % ($py - $no))") ns"
  echo "    rounds: $STACKS [${R["$b py"]}] no-python [${R["$b nopy"]}]"
done
