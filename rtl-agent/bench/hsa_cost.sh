#!/bin/sh
# What HSA capture (stock ROCm: no hipProfiler*Ext) adds per async copy and per graph replay, on
# the ROCm simulator: configurations interleaved, medians of ROUNDS rounds.
#   rtl-agent/bench/hsa_cost.sh [COPIES=20000] [REPLAYS=300] [NODES=100] [ROUNDS=7]
# Configurations (no collector attached: the agent's own cost):
#   off        no agent
#   hsa-nospans  HSA mode without replay spans (RTL_AGENT_HSA_SPANS=0): what the spans cost is
#              hsa minus this
#   hsa        the agent in HSA mode (HSA_TOOLS_LIB + LD_PRELOAD, RTL_AGENT_GPU=hsa): kernels,
#              copies, barriers, one span per replay (two barrier packets around its batch)
#   hsa+nodes  the same with RTL_AGENT_HSA_BATCHES=1 (every packet of every replay timed too)
# Copies: 64 KiB host->device hipMemcpyAsync (the simulator's copy engine: 6 us each), a
# synchronize every 100. Replays: NODES kernels of 5 us (the simulator's timing model: 500 us of
# GPU work for 100 nodes), hipGraphLaunch then hipStreamSynchronize; the latency is from the
# launch to the synchronize returning.
# Needs: cargo, hipcc, the simulator's sources (built into target/rtl-agent-sim).
# HSA_COST_NO_BUILD=1: use what a previous run built (target/rtl-agent-sim/rocm-sim/lib,
# target/rtl-agent-bench/{hsa_cost,librtl_agent_hsa.so}), e.g. on another machine.
set -eu
COPIES=${1:-20000}
REPLAYS=${2:-300}
NODES=${3:-100}
ROUNDS=${4:-7}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$ROOT/target/rtl-agent-bench
mkdir -p "$OUT"
AGENT=$OUT/librtl_agent_hsa.so
if [ "${HSA_COST_NO_BUILD:-0}" = 1 ]; then
  SIM=$ROOT/target/rtl-agent-sim/rocm-sim/lib
else
  SIM=$(sh "$ROOT/rtl-agent/bench/build_sim.sh" sim-only)/rocm-sim/lib
  (cd "$ROOT" && cargo build -q --release -p rtl-agent)
  # A private copy (see launch_cost.sh: a collector attached to target/release would add its cost).
  cp "$ROOT/target/release/librtl_agent.so" "$AGENT"
  if [ ! -x "$OUT/hsa_cost" ] || [ "$ROOT/rtl-agent/bench/hsa_cost.hip" -nt "$OUT/hsa_cost" ]; then
    hipcc --offload-arch=gfx90a -O2 "$ROOT/rtl-agent/bench/hsa_cost.hip" -o "$OUT/hsa_cost" 2>"$OUT/hipcc.log" \
      || { cat "$OUT/hipcc.log" >&2; exit 1; }
  fi
fi
export LD_LIBRARY_PATH=$SIM ROCM_SIM_PROFILER=none ROCM_SIM_KERNEL_DEFAULT_NS=5000
run() { # config mode args...
  c=$1; shift
  case $c in
    off) "$OUT/hsa_cost" "$@" ;;
    hsa-nospans) LD_PRELOAD=$AGENT HSA_TOOLS_LIB=$AGENT RTL_AGENT_GPU=hsa RTL_AGENT_HSA_SPANS=0 RTL_AGENT_QUIET=1 "$OUT/hsa_cost" "$@" ;;
    hsa) LD_PRELOAD=$AGENT HSA_TOOLS_LIB=$AGENT RTL_AGENT_GPU=hsa RTL_AGENT_QUIET=1 "$OUT/hsa_cost" "$@" ;;
    hsa+nodes) LD_PRELOAD=$AGENT HSA_TOOLS_LIB=$AGENT RTL_AGENT_GPU=hsa RTL_AGENT_HSA_BATCHES=1 RTL_AGENT_QUIET=1 "$OUT/hsa_cost" "$@" ;;
  esac
}
CONFIGS="off hsa-nospans hsa hsa+nodes"
for c in $CONFIGS; do : > "$OUT/copy.$c"; : > "$OUT/replay.$c"; done
r=0
while [ $r -lt "$ROUNDS" ]; do
  for c in $CONFIGS; do
    v=$(run $c copy "$COPIES" 65536) || { echo "hsa_cost copy failed under $c" >&2; exit 1; }
    echo "$v" >> "$OUT/copy.$c"
    v=$(run $c replay "$REPLAYS" "$NODES") || { echo "hsa_cost replay failed under $c" >&2; exit 1; }
    echo "$v" >> "$OUT/replay.$c"
  done
  r=$((r+1))
done
median() { awk -v f="$2" '{print $f}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
line() { # label file field base
  m=$(median "$2" "$3"); b=$(median "$4" "$3")
  awk -v l="$1" -v m="$m" -v b="$b" 'BEGIN { r = b != 0 ? sprintf("%+6.2f %%", (m-b)*100/b) : "   n/a"; printf "    %-42s %12.1f %+10.1f (%s)\n", l, m, m-b, r }'
}
echo "hipMemcpyAsync 64 KiB host->device on the simulator ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)), $COPIES copies x $ROUNDS rounds (medians of the rounds), vs off:"
for c in $CONFIGS; do
  echo "  $c"
  line "ns inside hipMemcpyAsync (median)" "$OUT/copy.$c" 1 "$OUT/copy.off"
  line "ns inside hipMemcpyAsync (p10)" "$OUT/copy.$c" 2 "$OUT/copy.off"
  line "wall ns per copy" "$OUT/copy.$c" 3 "$OUT/copy.off"
  line "process CPU ns per copy" "$OUT/copy.$c" 4 "$OUT/copy.off"
  line "agent threads' CPU ns per copy" "$OUT/copy.$c" 5 "$OUT/copy.off"
done
echo "graph replay, $NODES nodes x 5 us, $REPLAYS replays x $ROUNDS rounds (medians of the rounds), vs off:"
for c in $CONFIGS; do
  echo "  $c"
  line "replay latency ns, launch..sync (median)" "$OUT/replay.$c" 1 "$OUT/replay.off"
  line "replay latency ns, launch..sync (p10)" "$OUT/replay.$c" 2 "$OUT/replay.off"
  line "ns inside hipGraphLaunch (median)" "$OUT/replay.$c" 3 "$OUT/replay.off"
  line "process CPU ns per replay" "$OUT/replay.$c" 4 "$OUT/replay.off"
  line "agent threads' CPU ns per replay" "$OUT/replay.$c" 5 "$OUT/replay.off"
done
echo "what the replay spans cost (hsa vs hsa-nospans):"
for f in 1 2 3 5; do
  case $f in 1) l="replay latency (median)";; 2) l="replay latency (p10)";; 3) l="ns inside hipGraphLaunch";; 5) l="agent threads' CPU ns per replay";; esac
  line "$l" "$OUT/replay.hsa" $f "$OUT/replay.hsa-nospans"
done
