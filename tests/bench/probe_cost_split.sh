#!/usr/bin/env bash
# Program time per run of the entry and the return program apart (run_time_ns / run_cnt of each
# of the collector's programs that ran at least CALLS/2 times, named through bpftool), for
# several collector builds, interleaved, `--all --gpu none`; prints every sample, then the medians.
# probe_cost_ab.sh gives the sum per call in more modes; this says which program a change moved.
# Needs root, bpftool, and the bench target (cargo xtask bench probe-cost builds target/bench).
#   BINS="/tmp/rtl-before target/release/rtl-ebpf" ROUNDS=7 bash tests/bench/probe_cost_split.sh
set -euo pipefail
read -r -a BINS <<<"${BINS:?collector binaries to compare, space-separated}"
BENCH=${BENCH:-target/bench}
ROUNDS=${ROUNDS:-7}
CALLS=${CALLS:-300000}
was=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -q -w kernel.bpf_stats_enabled=1
trap 'sysctl -q -w kernel.bpf_stats_enabled=$was' EXIT
declare -A S
n=${#BINS[@]}
for r in $(seq "$ROUNDS"); do
  for k in $(seq 0 $((n - 1))); do
    i=$(((k + r) % n))
    taskset -c 1 "${BINS[$i]}" --all --quiet --gpu none --apis hipBenchTarget --lib "$BENCH/librtlbench.so" \
      -o /tmp/probe_cost_split.db --force 2>/tmp/probe_cost_split.err &
    p=$!
    for _ in $(seq 300); do grep -q "functions probed" /tmp/probe_cost_split.err && break; sleep 0.1; done
    sleep 0.3
    taskset -c 0 "$BENCH/probe_driver" "$CALLS" >/dev/null
    line="round $r [$i]"
    for f in /proc/"$p"/fdinfo/*; do
      awk -v calls="$CALLS" '/^run_time_ns:/{t=$2} /^run_cnt:/{c=$2} /^prog_id:/{id=$2} END{if (c >= calls / 2) print id, t / c}' "$f" 2>/dev/null || true
    done >/tmp/probe_cost_split.ids
    while read -r id ns; do
      name=$(bpftool prog show id "$id" -j | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')
      S[$i,$name]+="$ns "
      line+=" $name $(printf %.1f "$ns")"
    done </tmp/probe_cost_split.ids
    echo "$line"
    kill -INT $p
    wait $p || true
  done
done
for i in $(seq 0 $((n - 1))); do
  line="median [$i] ${BINS[$i]}:"
  sum=0
  for name in api_enter api_exit; do
    m=$(python3 -c 'import sys,statistics as s; print("%.1f" % s.median(float(x) for x in sys.argv[1:]))' ${S[$i,$name]:-0})
    line+=" $name $m"
    sum=$(python3 -c "print($sum + $m)")
  done
  echo "$line  (sum $sum)"
done
