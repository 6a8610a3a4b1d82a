#!/usr/bin/env bash
# Program time per call (entry + return: run_time_ns / run_cnt from the collector's program fds,
# kernel.bpf_stats_enabled) of several collector builds, interleaved: each round runs every
# build in every mode (--all --gpu none; --all --gpu clr: the fs-base read; attach --pid: the
# process filter; filt: attached for another process, the trap + filter floor), in a rotating order, so drifts in the machine's load hit all builds alike.
# Prints every sample (program ns / wall ns per call of the driver), then the medians. Needs root and the bench target (cargo xtask bench
# probe-cost builds target/bench/{librtlbench.so,probe_driver}).
#   BINS="/tmp/rtl-before target/release/rtl-ebpf" ROUNDS=5 bash tests/bench/probe_cost_ab.sh
set -euo pipefail
read -r -a BINS <<<"${BINS:?collector binaries to compare, space-separated}"
BENCH=${BENCH:-target/bench}
ROUNDS=${ROUNDS:-5}
CALLS=${CALLS:-300000}
MODES=${MODES:-"none clr pid"}
was=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -q -w kernel.bpf_stats_enabled=1
trap 'sysctl -q -w kernel.bpf_stats_enabled=$was' EXIT
prog_ns() { # entry+return program ns per call: the collector's programs that ran once per call
  cat /proc/"$1"/fdinfo/* 2>/dev/null | awk -v calls="$CALLS" '
    /^run_time_ns:/ { t = $2 } /^run_cnt:/ { if ($2 >= calls / 2) { T += t; N += $2 } }
    END { printf "%.1f\n", (N ? 2 * T / N : 0) }'; }
one() { # binary mode -> program ns per call
  local bin=$1 mode=$2 ns p d what gpu=none
  case $mode in
    none) what=(--all) ;;
    clr) what=(--all); gpu=clr ;;
    # the same probes attached for another process: each call pays the trap and the process
    # filter, then the programs return (the floor probe_cost_links.sh compares with)
    filt) what=(attach --pid $$) ;;
    pid)
      rm -f /tmp/probe_cost_ab.go; mkfifo /tmp/probe_cost_ab.go
      exec 9<>/tmp/probe_cost_ab.go
      PROBE_DRIVER_WAIT=1 taskset -c 0 "$BENCH/probe_driver" "$CALLS" </tmp/probe_cost_ab.go >/tmp/probe_cost_ab.out &
      d=$!
      sleep 0.2
      what=(attach --pid "$d" --keep-waiting) ;;
  esac
  taskset -c 1 "$bin" "${what[@]}" --quiet --gpu $gpu --apis hipBenchTarget --lib "$BENCH/librtlbench.so" \
    -o /tmp/probe_cost_ab.db --force 2>/tmp/probe_cost_ab.err &
  p=$!
  for _ in $(seq 300); do grep -q "functions probed" /tmp/probe_cost_ab.err && break; sleep 0.1; done
  sleep 0.3
  if [ "$mode" = pid ]; then echo go >&9; exec 9>&-; wait $d; else taskset -c 0 "$BENCH/probe_driver" "$CALLS" >/tmp/probe_cost_ab.out; fi
  ns=$(prog_ns $p)/$(grep -o '"ns_per_call":[0-9.]*' /tmp/probe_cost_ab.out | cut -d: -f2)
  kill -INT $p; wait $p || true
  echo "$ns"
}
declare -A S W
n=${#BINS[@]}
for r in $(seq "$ROUNDS"); do
  for m in $MODES; do
    line="round $r $m"
    for k in $(seq 0 $((n - 1))); do
      i=$(((k + r) % n))
      v=$(one "${BINS[$i]}" $m)
      S[$m,$i]+="${v%/*} "; W[$m,$i]+="${v#*/} "
    done
    for i in $(seq 0 $((n - 1))); do line+="  [$i] $(echo ${S[$m,$i]} | awk '{print $NF}')/$(echo ${W[$m,$i]} | awk '{print $NF}')"; done
    echo "$line"
  done
done
for i in $(seq 0 $((n - 1))); do echo "[$i] ${BINS[$i]}"; done
for m in $MODES; do
  line="median $m (program/wall ns):"
  for i in $(seq 0 $((n - 1))); do
    med() { python3 -c 'import sys,statistics as s; print("%.1f" % s.median(float(x) for x in sys.argv[1:]))' "$@"; }
    line+=" [$i] $(med ${S[$m,$i]})/$(med ${W[$m,$i]})"
  done
  echo "$line"
done
