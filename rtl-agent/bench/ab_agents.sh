#!/bin/bash
# Two builds of the agent against each other, interleaved round by round on the ROCm simulator
# (a noisy machine then slows both alike): hsa_cost copy (3000 64 KiB hipMemcpyAsync) and replay
# (200 replays of a 100-kernel graph) untraced, with agent A and with agent B (HSA capture, the
# defaults); per figure the median over the rounds.
#   rtl-agent/bench/ab_agents.sh A.so B.so [ROUNDS]
# Needs what `cargo xtask bench hsa-copy` builds: target/rtl-agent-bench/hsa_cost and the
# simulator in target/rtl-agent-sim. Example (an agent change):
#   cp target/release/librtl_agent.so /tmp/before.so; <change, cargo build --release -p rtl-agent>
#   rtl-agent/bench/ab_agents.sh /tmp/before.so target/release/librtl_agent.so 31
set -eu
[ $# -ge 2 ] || { echo "usage: $0 A.so B.so [ROUNDS]" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
A=$(realpath "$1") B=$(realpath "$2") ROUNDS=${3:-15}
BIN=$ROOT/target/rtl-agent-bench/hsa_cost LIB=$ROOT/target/rtl-agent-sim/rocm-sim/lib
[ -x "$BIN" ] && [ -d "$LIB" ] || { echo "$BIN or $LIB missing: run cargo xtask bench hsa-copy once" >&2; exit 1; }
# Private copies: a collector attached to target/release (another session's --all) would add its cost.
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cp "$A" "$T/A.so"; cp "$B" "$T/B.so"
export LD_LIBRARY_PATH=$LIB ROCM_SIM_PROFILER=none ROCM_SIM_KERNEL_DEFAULT_NS=5000
one() { # mode none|A|B args...
  local mode=$1 a=$2; shift 2
  if [ "$a" = none ]; then "$BIN" "$mode" "$@"
  else LD_PRELOAD=$T/$a.so HSA_TOOLS_LIB=$T/$a.so RTL_AGENT_GPU=hsa RTL_AGENT_QUIET=1 "$BIN" "$mode" "$@"; fi | tail -1
}
for mode in copy replay; do
  if [ $mode = copy ]; then args="3000 65536"; else args="200 100"; fi
  for _ in $(seq "$ROUNDS"); do for a in none A B; do echo "$mode $a $(one $mode $a $args)"; done; done
done > "$T/raw.txt"
echo "A = $1, B = $2; load $(cut -d' ' -f1 /proc/loadavg), $ROUNDS rounds interleaved, medians:"
python3 - "$T/raw.txt" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
names = {'copy': ['in call, median (ns)', 'in call, p10 (ns)', 'wall per copy (ns)', 'CPU per copy (ns)', 'agent CPU per copy (ns)'],
         'replay': ['wall latency, median (ns)', 'wall latency, p10 (ns)', 'in call, median (ns)', 'CPU per replay (ns)', 'agent CPU per replay (ns)']}
for mode in ['copy', 'replay']:
    print(mode)
    for i, n in enumerate(names[mode]):
        v = {a: st.median(float(r[2 + i]) for r in rows if r[0] == mode and r[1] == a) for a in ['none', 'A', 'B']}
        ratio = f"{v['B'] / v['A']:.3f}" if v['A'] else 'n/a'
        print(f"  {n:28s} untraced {v['none']:11.1f}   A {v['A']:11.1f}   B {v['B']:11.1f}   B/A {ratio}")
PY
