#!/usr/bin/env bash
# Probe cost per call by link kind, without bpftrace: ns per call of hipBenchTarget (probe_driver,
# pinned to CPU 0) with no probe, and under rtl-ebpf (--all --apis hipBenchTarget, on CPU 1) with
# uprobe_multi links and with per-probe perf-event links, interleaved ROUNDS times; plus the
# in-kernel program time (kernel.bpf_stats_enabled). Needs root, a built rtl-ebpf and the bench
# target (cargo xtask bench probe-cost builds target/bench/{librtlbench.so,probe_driver}).
#   RTL=target/release/rtl-ebpf BENCH=target/bench ROUNDS=5 bash tests/bench/probe_cost_links.sh
set -euo pipefail
RTL=${RTL:-target/release/rtl-ebpf}
BENCH=${BENCH:-target/bench}
ROUNDS=${ROUNDS:-5}
CALLS=${CALLS:-300000}
sysctl -q -w kernel.bpf_stats_enabled=1
ns() { taskset -c 0 "$BENCH/probe_driver" "$CALLS" | grep -o '"ns_per_call":[0-9.]*' | cut -d: -f2; }
have_bpftool() { command -v bpftool >/dev/null; }
max_id() { if have_bpftool; then bpftool -j prog show | python3 -c 'import json,sys; print(max([p["id"] for p in json.load(sys.stdin)]+[0]))'; else echo 0; fi; }
prog_ns() { # entry+return program ns per call for programs with id > $1 ("-" without bpftool)
  have_bpftool || { echo -; return; }
  bpftool -j prog show | python3 -c '
import json,sys
mx=int(sys.argv[1]); t=n=0
for p in json.load(sys.stdin):
    if p["id"]>mx and p.get("name") in ("api_enter","api_exit","api_enter_single","api_exit_single") and p.get("run_cnt",0)>0:
        t+=p["run_time_ns"]; n+=p["run_cnt"]
print("%.1f" % (2*t/max(n,1)))' "$1"; }
traced() {
  local links=$1 before what=(--all)
  # "filtered": the same probes and programs, attached for another process: each call pays the
  # trap and the process-filter lookup, then the program returns (a count-only-like floor).
  if [ "${2:-}" = filtered ]; then what=(attach --pid $$); fi
  before=$(max_id)
  RTL_EBPF_LINKS=$links taskset -c 1 "$RTL" "${what[@]}" --quiet --gpu none --apis hipBenchTarget --lib "$BENCH/librtlbench.so" \
    -o /tmp/probe_cost_links.db --force 2>/tmp/probe_cost_links.err &
  local p=$!
  for _ in $(seq 300); do grep -q "functions probed" /tmp/probe_cost_links.err && break; sleep 0.1; done
  sleep 0.3
  local w; w=$(ns)
  echo "$w $(prog_ns "$before")"
  kill -INT $p; wait $p || true
  # the perf-event fallback removes its probes in the background: wait for them to go
  # (without bpftool: until a call costs what it costs unprobed again; the kernel removes an
  # exited remover's probes from a worker, after the process is gone)
  for _ in $(seq 1200); do
    if have_bpftool; then
      bpftool prog show | grep -q "name api_e" || break
    else
      v=$(taskset -c 0 "$BENCH/probe_driver" 20000 | grep -o '"ns_per_call":[0-9.]*' | cut -d: -f2)
      python3 -c "import sys; sys.exit(0 if float('$v') < 100 else 1)" && break
    fi
    sleep 0.2
  done
}
printf "%-6s %10s %12s %12s %12s %10s %10s %10s\n" round none_ns filtered_ns multi_ns perf_ns filt_prog multi_prog perf_prog
for r in $(seq "$ROUNDS"); do
  # (traced runs to its end, the session's detach included, before the next measurement)
  n=$(ns)
  traced uprobe_multi filtered >/tmp/probe_cost_links.f
  traced uprobe_multi >/tmp/probe_cost_links.m
  traced perf_event >/tmp/probe_cost_links.p
  read -r f fp </tmp/probe_cost_links.f
  read -r m mp </tmp/probe_cost_links.m
  read -r p pp </tmp/probe_cost_links.p
  printf "%-6s %10s %12s %12s %12s %10s %10s %10s\n" "$r" "$n" "$f" "$m" "$p" "$fp" "$mp" "$pp"
done
