#!/bin/sh
# The collector's memory under a forging publisher (issue 15 items 6, 9): forge_ops publishes
# OPS forged GPU ops, each its own API record linked to no call, under `attach --pid`; prints the
# collector's peak RSS and what the GPU join kept and dropped.
#   sudo tests/bench/forged_ops_rss.sh [RTL_EBPF] [OPS]
# (RTL_EBPF defaults to target/release/rtl-ebpf; OPS to 2000000. Needs `make -C tests/workloads c`.)
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
rtl=${1:-$here/target/release/rtl-ebpf}
ops=${2:-2000000}
wl=$here/tests/workloads/build
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkfifo "$d/in"
"$wl/forge_ops" "$wl/librtl_agent_evil.so" 1 "$ops" < "$d/in" > "$d/out" &
app=$!
exec 3> "$d/in"
until grep -q ready "$d/out"; do sleep 0.1; done
"$rtl" attach --quiet --apis hipGetErrorString --pid "$app" -o "$d/t.db" 2> "$d/err" 3>&- &
rtl_pid=$!
until grep -q "functions probed" "$d/err" 2>/dev/null; do sleep 0.2; done
echo go >&3
until grep -q done "$d/out"; do sleep 0.2; done
exec 3>&-
wait "$app"
wait "$rtl_pid"
q() { sqlite3 "$d/t.db" "SELECT coalesce((SELECT value FROM rocpd_metadata WHERE tag = '$1'), '-')"; }
echo "$(basename "$rtl"): $ops forged ops: gpu_ops $(q gpu_ops), collector_peak_rss_kb $(q collector_peak_rss_kb)," \
     "profiler rows kept (peak) $(q gpu_join_profiler_rows_peak), dropped $(q gpu_join_profiler_rows_dropped), ringbuf_drops $(q ringbuf_drops)"
