#!/bin/bash
# What CUDA graph replays and eager launches cost with the CUPTI agent (issue 14), on the H200:
# runnable on a machine with PyTorch + CUDA 13 and no package registry, from carried binaries.
#
#   bash tests/gpu/graph_cost.sh     (as root, from the repository root; results under $OUT)
#
# Carried binaries (built here, stripped into the ignored .gpu/):
#   cargo build --release --ignore-rust-version -p rtl-user -p rtl-agent
#   mkdir -p .gpu && cp target/release/rtl-ebpf target/release/librtl_agent.so .gpu/ && strip .gpu/*
# (`run` finds the agent next to the binary.)
#
# Workloads (tests/gpu/app.py): `graph R`, a 50-kernel CUDA graph replayed R times (GRAPH_R,
# default 2000), and `eager N`, N tiny kernels launched one by one (EAGER_N, default 10000), each
# in 10 timed blocks (per block: launch all, synchronize; the median block's wall time per
# replay / per launch). Configurations, REPS rounds (default 2: about 8 minutes, one 10-minute
# call; most of it waiting for the kernel to remove each traced run's probes) interleaved, the
# order rotating:
#   untraced                       the app alone
#   cupti (graph-level)            rtl-ebpf run --runtime cuda --gpu cupti: one CUPTI
#                                  graph-level record per replay (the default)
#   cupti --graph-nodes            the same with every node's kernel record (per-node, as before;
#                                  graph only: eager launches do not depend on it)
#   cpu only                       rtl-ebpf run --runtime cuda --gpu none (probes, no agent)
# Prints, per workload and configuration, the median us per replay / per launch and the
# difference to untraced; checks the issue's targets (graph replay with GPU times <= 5 % over
# untraced; eager launches no worse than the +3.8 us measured before, docs/benchmarks.md), and
# checks each traced graph run's trace: one GraphExecution op per replay (graph-level) or 50
# kernels per replay and no GraphExecution op (--graph-nodes), every one linked to its call.
# Writes $OUT/graph_cost.jsonl (one line per run) and $OUT/graph_cost.txt (the summary); exits
# 1 when a target or a trace check fails.
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-.gpu/rtl-ebpf}
PY=${PY:-/opt/torch/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
OUT=${OUT:-/tmp/rtl-gpu-out}
REPS=${REPS:-2}
GRAPH_R=${GRAPH_R:-2000}
EAGER_N=${EAGER_N:-10000}
W=/tmp/rtl-graph-cost; rm -rf "$W"; mkdir -p "$W" "$OUT"
APP=tests/gpu/app.py
export PYTHONUNBUFFERED=1
log() { echo "== $*" >&2; }
[ -x "$BIN" ] || { echo "no $BIN: build and carry it first (see the header)" >&2; exit 2; }
[ -f "$(dirname "$BIN")/librtl_agent.so" ] || { echo "no librtl_agent.so next to $BIN (see the header)" >&2; exit 2; }
: > "$OUT/graph_cost.jsonl"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >&2 || true
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" >&2 || exit 2

# Waits until the probes a finished rtl-ebpf left to its background remover are gone (quiesced
# probes still trap: the next untraced run must not pay for them).
wait_released() {
  local pid; pid=$(grep -o "background (pid [0-9]*" "$1" 2>/dev/null | grep -o "[0-9]*$")
  [ -n "$pid" ] || return 0
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  log "probe remover $pid still running after 60 s"
}

hows=("untraced" "cupti (graph-level)" "cupti --graph-nodes" "cpu only")
rc=0
for r in $(seq 1 "$REPS"); do
  for i in 0 1 2 3; do
    how=${hows[$(( (i + r) % 4 ))]}
    for w in "graph $GRAPH_R" "eager $EAGER_N"; do
      set -- $w
      [ "$how" = "cupti --graph-nodes" ] && [ "$1" = eager ] && continue
      meta="{\"how\": \"$how\", \"round\": $r}"
      tag=$(echo "$how" | tr -c 'a-z0-9\n' '_')_$1_$r
      db=$W/$tag.db
      case $how in
        untraced) "$PY" $APP $1 $2 --blocks 10 --warm 1 --out "$OUT/graph_cost.jsonl" --meta "$meta" > /dev/null ;;
        "cupti (graph-level)") opts=(--gpu cupti) ;;
        "cupti --graph-nodes") opts=(--gpu cupti --graph-nodes) ;;
        "cpu only") opts=(--gpu none) ;;
      esac
      if [ "$how" != untraced ]; then
        meta="{\"how\": \"$how\", \"round\": $r, \"db\": \"$db\"}"
        "$BIN" run --runtime cuda "${opts[@]}" --quiet -o "$db" -- "$PY" $APP $1 $2 --blocks 10 --warm 1 \
          --out "$OUT/graph_cost.jsonl" --meta "$meta" > /dev/null 2> "$W/$tag.err" || { log "$how $1 failed:"; tail -5 "$W/$tag.err" >&2; rc=1; }
        wait_released "$W/$tag.err"
      fi
    done
  done
  log "round $r done"
done

"$PY" - "$OUT/graph_cost.jsonl" "$GRAPH_R" <<'EOF' | tee "$OUT/graph_cost.txt"
import json, sqlite3, statistics, sys
from collections import defaultdict
path, graph_r = sys.argv[1], int(sys.argv[2])
runs = defaultdict(list)
rows = [json.loads(l) for l in open(path) if l.strip()]
for r in rows:
    runs[(r["mode"], r["how"])].append(r)
bad = []
print("Per replay (graph, 50 kernels) and per launch (eager), median of the runs' median blocks, us:")
for mode, unit in (("graph", "replay"), ("eager", "launch")):
    base = statistics.median(r["per_unit_us"] for r in runs[(mode, "untraced")]) if runs[(mode, "untraced")] else None
    for how in ("untraced", "cupti (graph-level)", "cupti --graph-nodes", "cpu only"):
        v = [r["per_unit_us"] for r in runs[(mode, how)]]
        if not v:
            if not (mode == "eager" and how == "cupti --graph-nodes"):
                print(f"  {mode:5} {how:22} no runs"); bad.append(f"{mode} {how}: no runs")
            continue
        m = statistics.median(v)
        d = "" if base is None or how == "untraced" else f"  {m - base:+.2f} us ({(m - base) * 100 / base:+.1f} %)"
        print(f"  {mode:5} {how:22} {m:8.2f} us per {unit} (runs: {', '.join(f'{x:.2f}' for x in v)}){d}")
    if base is not None and runs[(mode, "cupti (graph-level)")]:
        m = statistics.median(r["per_unit_us"] for r in runs[(mode, "cupti (graph-level)")])
        if mode == "graph":
            ok = m <= base * 1.05
            print(f"  target: graph replay with GPU times <= 5 % over untraced: {(m - base) * 100 / base:+.1f} % -> {'PASS' if ok else 'FAIL'}")
        else:
            ok = m - base <= 3.8
            print(f"  target: eager launch no worse than before (+3.8 us): {m - base:+.2f} us -> {'PASS' if ok else 'FAIL'}")
        if not ok:
            bad.append(f"{mode} target")
# The traces: what each graph run recorded.
print("Traces of the graph runs (measured region + warm-up: 1 + R replays):")
def q(db, sql):
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute(sql).fetchone()[0]
for r in rows:
    if r["mode"] != "graph" or "db" not in r or not r["how"].startswith("cupti"):
        continue
    db = r["db"]
    op = "select count(*) from rocpd_op o join rocpd_string s on o.opType_id = s.id where s.string = '{}'"
    spans, kernels = q(db, op.format("GraphExecution")), q(db, op.format("KernelExecution"))
    unlinked = q(db, "select count(*) from rocpd_op o left join rocpd_api_ops l on l.op_id = o.id where l.op_id is null and o.gpuId >= 0")
    replays = 1 + graph_r // 10 * 10
    if r["how"] == "cupti (graph-level)":
        ok = spans == replays and unlinked == 0
        want = f"{replays} GraphExecution"
    else:
        ok = spans == 0 and kernels >= replays * r["graph_kernels"] and unlinked == 0
        want = f"0 GraphExecution, >= {replays * r['graph_kernels']} kernels"
    print(f"  {r['how']:22} round {r['round']}: {spans} GraphExecution, {kernels} kernels, {unlinked} unlinked (want {want}, 0 unlinked) -> {'PASS' if ok else 'FAIL'}")
    if not ok:
        bad.append(f"trace {db}")
print("FAILED: " + "; ".join(bad) if bad else "all checks passed")
sys.exit(1 if bad else 0)
EOF
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
exit $rc
