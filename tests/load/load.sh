#!/bin/sh
# Load benchmark of issue 8: P processes x T threads calling one HIP API back to back for S
# seconds under `rtl-ebpf run`, then the figures: calls made (the workload's own count), rows
# written, records dropped (total and per CPU), whether every lost record is accounted for, and
# the collector's peak RSS and CPU time.
#
#   sudo tests/load/load.sh [-p 16] [-t 8] [-s 60] [-b BUFFER_MB] [-a geterrorstring|getdevicecount]
#
# Needs root, `cargo build --release --ignore-rust-version -p rtl-user`, `make -C tests/workloads`, sqlite3, python3.
# Exits 0 when the counts are exact or every lost record is accounted for, 1 otherwise.
set -eu
P=16 T=8 S=60 B=64 A=geterrorstring
while getopts p:t:s:b:a: o; do
  case $o in p) P=$OPTARG;; t) T=$OPTARG;; s) S=$OPTARG;; b) B=$OPTARG;; a) A=$OPTARG;; *) exit 2;; esac
done
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RTL=${RTL:-$ROOT/target/release/rtl-ebpf}
HL=$ROOT/tests/workloads/build/hot_loop
[ -x "$RTL" ] || { echo "build rtl-ebpf first: cargo build --release --ignore-rust-version -p rtl-user" >&2; exit 2; }
[ -x "$HL" ] || { echo "build the workloads first: make -C tests/workloads" >&2; exit 2; }
case $A in geterrorstring) API=hipGetErrorString;; getdevicecount) API=hipGetDeviceCount;; *) API=$A;; esac
# A private directory for the trace and the truth (mktemp -d: never a predictable /tmp name).
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
echo "load: $P processes x $T threads x ${S}s calling $API, ring buffer ${B} MiB" >&2
RTL_WORKLOAD_TRUTH=$D/truth.jsonl "$RTL" run --quiet --buffer-mb "$B" --apis "$API" -o "$D/t.db" -- \
  sh -c "i=0; while [ \$i -lt $P ]; do $HL --threads $T --seconds $S --api $A >/dev/null & i=\$((i+1)); done; wait" \
  2> "$D/rtl.err" || { cat "$D/rtl.err" >&2; exit 1; }
python3 - "$D" "$S" <<'PY'
import json, sqlite3, sys
d, secs = sys.argv[1], float(sys.argv[2])
made = sum(json.loads(l)["calls"] for l in open(d + "/truth.jsonl") if '"aggregate":true' in l)
c = sqlite3.connect(d + "/t.db")
m = dict(c.execute("SELECT tag, value FROM rocpd_metadata"))
q = lambda s: c.execute(s).fetchone()[0]
complete = q("SELECT count(*) FROM rocpd_api a LEFT JOIN rtl_api r ON r.api_id = a.id WHERE coalesce(r.status, 0) = 0")
forced = q("SELECT count(*) FROM rtl_api WHERE status BETWEEN 1 AND 4")
# Records lost: dropped by the probes (ring buffer full) or read but not kept (backlog full at the end).
orph, drops = int(m["returns_without_entry"]), int(m["ringbuf_drops"]) + int(m.get("spool_discarded_records", 0))
ent, ext = int(m["probe_entries"]), int(m["probe_exits"])
lost_e, lost_x = ent - (complete + forced), ext - (complete + orph)
written = [l for l in open(d + "/rtl.err") if "API calls from" in l]
ok = ent == made and ext == made and lost_e >= 0 and lost_x >= 0 and lost_e + lost_x <= drops
slack = drops - (lost_e + lost_x)
print(f"calls made (workload's count)   {made}  ({made / secs:.0f}/s)")
print(f"probe hits entry/return         {ent} / {ext}")
print(f"rows complete / closed by force {complete} / {forced}   orphan returns {orph}")
print(f"records dropped                 {drops}  per CPU [{m['ringbuf_drops_per_cpu']}]")
print(f"lost entries + lost returns     {lost_e} + {lost_x}  (task records among the drops: {slack})")
print(f"events lost unaccounted         {0 if ok else 'MISMATCH'}")
print(f"backlog peak / written after    {int(m.get('spool_peak_bytes', 0)) >> 20} MiB / {m.get('backlog_drain_s', '?')} s")
print(f"collector peak RSS              {m['collector_peak_rss_kb']} kB")
print(f"collector CPU / wall            {m['collector_cpu_s']} s / {m['collector_wall_s']} s")
print(f"integrity_check                 {q('PRAGMA integrity_check')}")
print(f"collector summary               {written[0].strip() if written else '?'}")
sys.exit(0 if ok and q('PRAGMA integrity_check') == 'ok' else 1)
PY
