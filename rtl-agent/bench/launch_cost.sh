#!/bin/sh
# Added cost per hipLaunchKernel with the agent on vs off, on the ROCm simulator, same run,
# configurations interleaved, medians of ROUNDS rounds.
#   rtl-agent/bench/launch_cost.sh [LAUNCHES=100000] [ROUNDS=7]
# Configurations:
#   off       no agent, runtime profiler off
#   prof      no agent, runtime profiler on (GPU_CLR_PROFILE_OUTPUT=/dev/null): the runtime's own cost
#   agent     LD_PRELOAD=librtl_agent.so (profiler on, chunk callback, queue, publisher thread)
#   agent+up  agent with a bpftrace uprobe on rtl_agent_publish (the collector's hand-off cost),
#             only when bpftrace is installed and we are root
# Needs: cargo, hipcc, the simulator's sources (built into target/rtl-agent-sim).
set -eu
N=${1:-100000}
ROUNDS=${2:-7}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$ROOT/target/rtl-agent-bench
mkdir -p "$OUT"
# Our own build of the committed simulator (its owner rebuilds tests/rocm-sim/build at any time).
SIM=$(sh "$ROOT/rtl-agent/bench/build_sim.sh" sim-only)/rocm-sim/lib
(cd "$ROOT" && cargo build -q --release -p rtl-agent)
AGENT=$ROOT/target/release/librtl_agent.so
if [ ! -x "$OUT/launch_cost" ] || [ "$ROOT/rtl-agent/bench/launch_cost.hip" -nt "$OUT/launch_cost" ]; then
  hipcc --offload-arch=gfx90a -O2 "$ROOT/rtl-agent/bench/launch_cost.hip" -o "$OUT/launch_cost" 2>"$OUT/hipcc.log" \
    || { cat "$OUT/hipcc.log" >&2; exit 1; }
fi
export LD_LIBRARY_PATH=$SIM ROCM_SIM_KERNEL_DEFAULT_NS=${ROCM_SIM_KERNEL_DEFAULT_NS:-100}
UPROBE=0
if command -v bpftrace >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then UPROBE=1; fi
run() { # config -> ns per launch
  case $1 in
    off) "$OUT/launch_cost" "$N" ;;
    prof) GPU_CLR_PROFILE_OUTPUT=/dev/null "$OUT/launch_cost" "$N" ;;
    agent) LD_PRELOAD=$AGENT RTL_AGENT_QUIET=1 "$OUT/launch_cost" "$N" ;;
    agent+up)
      bpftrace -q -e "uprobe:$AGENT:rtl_agent_publish { @hits = count(); }" >"$OUT/bpftrace.log" 2>&1 &
      BP=$!
      # wait until the probe is attached
      i=0; while [ $i -lt 100 ] && ! grep -q rtl_agent_publish /sys/kernel/debug/tracing/uprobe_events 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done
      sleep 1
      LD_PRELOAD=$AGENT RTL_AGENT_QUIET=1 "$OUT/launch_cost" "$N"
      kill -INT $BP 2>/dev/null; wait $BP 2>/dev/null || true ;;
  esac
}
CONFIGS="off prof agent"
[ $UPROBE = 1 ] && CONFIGS="$CONFIGS agent+up"
for c in $CONFIGS; do : > "$OUT/res.$c"; done
r=0
while [ $r -lt "$ROUNDS" ]; do
  for c in $CONFIGS; do
    v=$(run $c) || v=$(run $c) || { echo "launch_cost failed under config $c" >&2; exit 1; }
    echo "$v" >> "$OUT/res.$c"
  done
  r=$((r+1))
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
OFF=$(median "$OUT/res.off")
echo "hipLaunchKernel on the simulator, $N launches x $ROUNDS rounds, median ns/launch:"
for c in $CONFIGS; do
  m=$(median "$OUT/res.$c")
  awk -v c="$c" -v m="$m" -v off="$OFF" 'BEGIN { printf "  %-9s %9.1f ns   added vs off: %+8.1f ns (%+.1f %%)\n", c, m, m-off, (m-off)*100/off }'
done
if [ $UPROBE = 1 ]; then echo "  (agent+up: $(grep -o '[0-9]*' "$OUT/bpftrace.log" | tail -1) uprobe hits in the last round)"; fi
PROF=$(median "$OUT/res.prof"); AG=$(median "$OUT/res.agent")
awk -v p="$PROF" -v a="$AG" 'BEGIN { printf "agent cost over the runtime profiler alone: %+.1f ns per launch\n", a-p }'
