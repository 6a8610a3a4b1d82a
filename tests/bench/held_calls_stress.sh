#!/usr/bin/env bash
# Held calls under load: many threads, few call slots, the collector taking waiting threads'
# held calls every 2 ms while the owners race it (docs/trace-format.md, "Fewer records per common
# call"). Runs tests/workloads/call_slots.c (THREADS threads x CALLS hipSlotCall each, plus its
# nested, exiting and blocked calls) under `rtl-ebpf --all --gpu none` with RTL_CALL_SLOTS=SLOTS,
# and prints the hipSlotCall rows against the workload's own count (CALLS * (THREADS + 1) + 3),
# with the probes' counters. Needs root and a built rtl-ebpf.
#   bash tests/bench/held_calls_stress.sh 200 3000 64
set -euo pipefail
T=${1:?threads} C=${2:?calls per thread} S=${3:?call slots (a power of two up to 8192)}
RTL=${RTL:-target/release/rtl-ebpf}
src=$(pwd)/tests/workloads/call_slots.c
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cc -O2 -fno-omit-frame-pointer -fcf-protection=none -DCALL_SLOTS_LIB -shared -fPIC -pthread -o "$d/libcallslots.so" "$src"
cc -O2 -pthread -o "$d/call_slots" "$src" -L"$d" -lcallslots -Wl,-rpath,"$d"
RTL_CALL_SLOTS=$S "$RTL" --all --gpu none --apis hipSlotCall,hipSlotNest,hipSlotExit,hipSlotBlock --lib "$d/libcallslots.so" \
  -o "$d/t.db" --force 2>"$d/err" &
p=$!
for _ in $(seq 300); do grep -q "functions probed" "$d/err" && break; sleep 0.1; done
"$d/call_slots" "$T" "$C" 50 4 >"$d/out" &
w=$!
for _ in $(seq 1200); do grep -q blocked "$d/out" && break; sleep 0.1; done
grep -q blocked "$d/out" || { echo "the workload failed its own checks" >&2; kill -INT $p; exit 1; }
kill -INT $p
wait $p || true
kill $w 2>/dev/null || true
rows=$(sqlite3 "$d/t.db" "SELECT count(*) FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id WHERE s.string = 'hipSlotCall'")
distinct=$(sqlite3 "$d/t.db" "SELECT count(DISTINCT r.a0) FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id \
  JOIN rtl_api r ON r.api_id = a.id WHERE s.string = 'hipSlotCall' AND r.a1 = 3 * r.a0 AND r.status = 0 AND r.ret % 4294967296 = r.a0 % 1000 + 1")
echo "threads $T, calls $C each, slots $S: hipSlotCall rows $rows (distinct first arguments, each with its own other arguments and return value: $distinct), the workload made $((C * (T + 1) + 3))"
sqlite3 "$d/t.db" "SELECT tag || ' = ' || value FROM rocpd_metadata WHERE tag IN ('probe_calls_taken', 'probe_call_batches', \
  'held_take_runs', 'ringbuf_drops', 'probe_calls_dropped', 'records_rejected', 'returns_without_entry', 'calls_unclosed') ORDER BY tag"
