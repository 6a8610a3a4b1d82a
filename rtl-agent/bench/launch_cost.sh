#!/bin/sh
# Added cost per hipLaunchKernel with the agent on vs off, on the ROCm simulator, same run,
# configurations interleaved, medians of ROUNDS rounds.
#   rtl-agent/bench/launch_cost.sh [LAUNCHES=100000] [ROUNDS=7]
# Configurations:
#   off       no agent, runtime profiler off
#   prof      no agent, runtime profiler on (GPU_CLR_PROFILE_OUTPUT=/dev/null): the runtime's own cost
#   agent     LD_PRELOAD=librtl_agent.so (profiler on, chunk callback, queue, publisher thread)
#   hsa       the agent in HSA mode (HSA_TOOLS_LIB, RTL_AGENT_GPU=hsa: signal capture)
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
# A private copy (its own inode): a collector running on this machine (`rtl-ebpf --all`)
# attaches to target/release/librtl_agent.so wherever it is mapped, which would add its
# hand-off cost to "agent" behind our back.
cp "$ROOT/target/release/librtl_agent.so" "$OUT/librtl_agent.so"
AGENT=$OUT/librtl_agent.so
gcc -O2 -o "$OUT/publish_cost" "$ROOT/rtl-agent/bench/publish_cost.c" -ldl
BP=
trap '[ -n "$BP" ] && kill -INT $BP 2>/dev/null; true' EXIT INT TERM
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
    hsa) LD_PRELOAD=$AGENT HSA_TOOLS_LIB=$AGENT RTL_AGENT_GPU=hsa RTL_AGENT_QUIET=1 "$OUT/launch_cost" "$N" ;;
    agent+up)
      bpftrace -q -e "uprobe:$AGENT:rtl_agent_publish { @hits = count(); }" >"$OUT/bpftrace.log" 2>&1 &
      BP=$!
      # wait until the probe is attached
      i=0; while [ $i -lt 100 ] && ! grep -q rtl_agent_publish /sys/kernel/debug/tracing/uprobe_events 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done
      sleep 1
      rc=0
      LD_PRELOAD=$AGENT RTL_AGENT_QUIET=1 "$OUT/launch_cost" "$N" || rc=$?
      kill -INT $BP 2>/dev/null; wait $BP 2>/dev/null || true; BP=
      return $rc ;;
  esac
}
CONFIGS="off prof agent hsa"
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
median() { awk -v f="$2" '{print $f}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
OFF=$(median "$OUT/res.off" 1); OFFC=$(median "$OUT/res.off" 2)
echo "hipLaunchKernel on the simulator, $N launches x $ROUNDS rounds, medians per launch:"
echo "  config         wall ns   added vs off         process CPU ns   added vs off"
for c in $CONFIGS; do
  m=$(median "$OUT/res.$c" 1); mc=$(median "$OUT/res.$c" 2)
  awk -v c="$c" -v m="$m" -v off="$OFF" -v mc="$mc" -v offc="$OFFC" 'BEGIN { printf "  %-9s %12.1f %+9.1f (%+5.1f %%) %14.1f %+9.1f (%+5.1f %%)\n", c, m, m-off, (m-off)*100/off, mc, mc-offc, (mc-offc)*100/offc }'
done
if [ $UPROBE = 1 ]; then echo "  (agent+up: $(grep -o '[0-9]*' "$OUT/bpftrace.log" | tail -1) uprobe hits in the last round)"; fi
PROF=$(median "$OUT/res.prof" 1); AG=$(median "$OUT/res.agent" 1)
PROFC=$(median "$OUT/res.prof" 2); AGC=$(median "$OUT/res.agent" 2)
awk -v p="$PROF" -v a="$AG" -v pc="$PROFC" -v ac="$AGC" 'BEGIN { printf "agent over the runtime profiler alone: %+.1f ns wall, %+.1f ns CPU per launch\n", a-p, ac-pc }'

# The hand-off alone: ns per rtl_agent_publish call (4 KiB batch), without and with a uprobe.
P0=$(RTL_AGENT_GPU=none "$OUT/publish_cost" "$AGENT" 200000)
echo "rtl_agent_publish call, no probe: $P0 ns"
if [ $UPROBE = 1 ]; then
  bpftrace -q -e "uprobe:$AGENT:rtl_agent_publish { @hits = count(); }" >"$OUT/bpftrace.log" 2>&1 &
  BP=$!
  sleep 2
  P1=$(RTL_AGENT_GPU=none "$OUT/publish_cost" "$AGENT" 50000)
  kill -INT $BP 2>/dev/null; wait $BP 2>/dev/null || true; BP=
  echo "rtl_agent_publish call, bpftrace uprobe (count only): $P1 ns"
fi
