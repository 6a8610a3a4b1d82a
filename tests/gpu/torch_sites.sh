#!/bin/bash
# PyTorch launch sites on the GPU machine (issue 17): is the Python function that issued each
# kernel its recorded site, eagerly and in a CUDA graph, and what do stacks cost per launch?
#
#   bash tests/gpu/torch_sites.sh        (as root, from the repository root; results under $OUT)
#
# 1. sites: tests/gpu/torch_sites.py (known functions, one kernel kind each; a graph captured from
#    four functions) under `rtl-ebpf run --runtime cuda --gpu cupti --stacks MODE`, MODE = dwarf,
#    fp and python (graph-level records: the replay's capture must hold the four functions' sites in
#    capture order), and dwarf with --graph-nodes (every replayed kernel placed on its node and
#    attributed to the function that created the node). Prints, per run, the kernels whose
#    recorded site is the right Python function (and line) against the workload's truth.
# 2. cost: tests/gpu/app.py eager (launch-bound x.add_ loop) per launch, rounds rotated:
#    untraced; `--gpu none` (CPU-side tracing); + `--stacks python`; + `--stacks dwarf`; + `--stacks fp`;
#    `--stacks dwarf --no-python-frames`; torch.profiler; torch.profiler with_stack=True.
# Env: BIN (.gpu/rtl-ebpf), PY, REPS (cost rounds, 3), EAGER_N (10000), STEPS ("sites cost"), OUT.
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-.gpu/rtl-ebpf}
PY=${PY:-/opt/torch/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
OUT=${OUT:-/tmp/rtl-gpu-out}
REPS=${REPS:-3}
EAGER_N=${EAGER_N:-10000}
STEPS=${STEPS:-sites cost}
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
W=/tmp/rtl-sites; rm -rf "$W"; mkdir -p "$W" "$OUT"
export PYTHONUNBUFFERED=1
log() { echo "== $*" >&2; }
"$PY" --version >&2
rc=0

if has sites; then
for run in "dwarf" "fp" "python" "dwarf --graph-nodes"; do
  name=$(echo "$run" | tr -d ' -')
  log "sites: --stacks $run"
  "$BIN" run --force --runtime cuda --gpu cupti --quiet --stacks $run -o "$W/$name.db" -- \
    "$PY" tests/gpu/torch_sites.py --truth "$W/$name.json" > "$W/$name.out" 2> "$W/$name.err" < /dev/null
  st=$?
  if [ $st != 0 ]; then echo "rtl-ebpf run failed ($st)"; tail -5 "$W/$name.err"; rc=1; continue; fi
  cp "$W/$name.db" "$W/$name.json" "$OUT/" 2>/dev/null
  "$PY" - "$W/$name.db" "$W/$name.json" "$run" <<'EOF' || rc=1
import collections, json, sqlite3, sys
db, truth_path, run = sys.argv[1:]
T = json.load(open(truth_path))
lines = {k: tuple(v) for k, v in T["lines"].items()}
c = sqlite3.connect(db)
SITE = """LEFT JOIN rtl_api_stack s ON s.api_id = {api} LEFT JOIN rtl_stack st ON st.id = s.stack_id
          LEFT JOIN rtl_frame f ON f.id = st.site_frame_id LEFT JOIN rtl_python_frame p ON p.frame_id = f.id"""
def key_of(desc):
    for k in lines:
        if k in desc:
            return k
    return None
ok = True
# Eager kernels: each one's launching call (rocpd_api_ops) and that call's site.
def per_op(rows):
    """One (description, function, line) per op: an op linked to several calls (a runtime call
    and the driver call inside it) counts once, at a named site where one has it."""
    best = {}
    for oid, desc, fn, ln in rows:
        if oid not in best or best[oid][1] == '?':
            best[oid] = (desc, fn, ln)
    return list(best.values())
rows = per_op(c.execute(f"""SELECT o.id, o.description, coalesce(f.symbol, '?'), coalesce(p.line, -1) FROM op o
    JOIN rocpd_api_ops ao ON ao.op_id = o.id JOIN rocpd_api a ON a.id = ao.api_id {SITE.format(api='a.id')}
    WHERE o.opType = 'KernelExecution' AND ao.api_id NOT IN (SELECT api_id FROM rtl_graph_launch)
      AND a.start BETWEEN ? AND ?""", (T["t0"], T["t1"])).fetchall())
got, right, right_line, other = collections.Counter(), 0, 0, collections.Counter()
for desc, fn, ln in rows:
    k = key_of(desc)
    if k is None or k not in T["eager"]:
        other[desc[:80]] += 1
        continue
    got[k] += 1
    right += fn == lines[k][0]
    right_line += (fn, ln) == lines[k]
total = sum(T["eager"].values())
print(f"--stacks {run}: eager: {right} of {total} kernels at the Python function that issued them "
      f"({100.0 * right / total:.2f} %), {right_line} at its line too; kernels seen {sum(got.values())}")
for k, n in T["eager"].items():
    if got[k] != n:
        print(f"  {k}: issued {n}, traced {got[k]}"); ok = False
if other:
    print(f"  other kernels in the window: {dict(other)}")
if right < 0.99 * total:
    ok = False
    bad = collections.Counter()
    for desc, fn, ln in rows:
        k = key_of(desc)
        if k in T["eager"] and fn != lines[k][0]:
            bad[(k, fn, ln)] += 1
    print(f"  wrong sites: {bad.most_common(8)}")
# The graph: every replay linked to its capture; the capture's calls in node order, each at
# the function that made it.
cap = c.execute("""SELECT capture_id, count(*) FROM rtl_graph_launch gl JOIN rocpd_api a ON a.id = gl.api_id
    WHERE a.start BETWEEN ? AND ? GROUP BY capture_id""", (T["t0"], T["t1"])).fetchall()
replays = sum(n for _, n in cap)
ops = c.execute("""SELECT count(*) FROM op o JOIN rocpd_api_ops ao ON ao.op_id = o.id JOIN rtl_graph_launch gl ON gl.api_id = ao.api_id
    WHERE o.opType = 'GraphExecution'""").fetchone()[0]
order = []
if len(cap) == 1:
    order = [r[0] for r in c.execute(f"""SELECT coalesce(f.symbol, '?') FROM rtl_capture_call cc {SITE.format(api='cc.api_id')}
        WHERE cc.capture_id = ? ORDER BY cc.node""", (cap[0][0],))]
want = T["capture_order"]
print(f"--stacks {run}: graph: {replays} of {T['replays']} replays linked to one capture ({len(cap)} captures), "
      f"{ops} GraphExecution ops; capture sites in node order {'match' if order == want else 'DIFFER'} ({len(order)} nodes)")
if replays != T["replays"] or len(cap) != 1 or order != want:
    ok = False
    print(f"  capture sites: {order}\n  truth:         {want}")
rsite = c.execute(f"""SELECT coalesce(f.symbol, '?'), count(*) FROM rtl_graph_launch gl JOIN rocpd_api a ON a.id = gl.api_id
    {SITE.format(api='gl.api_id')} WHERE a.start BETWEEN ? AND ? GROUP BY 1""", (T["t0"], T["t1"])).fetchall()
print(f"  replay call sites: {rsite}")
if rsite != [(T["replay_site"], T["replays"])]:
    ok = False
if "--graph-nodes" in run:
    rows = per_op(c.execute(f"""SELECT o.id, o.description, coalesce(f.symbol, '?'), coalesce(p.line, -1) FROM op o
        JOIN rocpd_api_ops ao ON ao.op_id = o.id JOIN rtl_graph_launch gl ON gl.api_id = ao.api_id
        JOIN rocpd_api a ON a.id = gl.api_id LEFT JOIN rtl_op_site os ON os.op_id = o.id {SITE.format(api='os.api_id')}
        WHERE o.opType = 'KernelExecution' AND a.start BETWEEN ? AND ?""", (T["t0"], T["t1"])).fetchall())
    total = T["replays"] * len(want)
    right = sum(1 for d, fn, ln in rows if key_of(d) and fn == lines[key_of(d)][0])
    unplaced = sum(1 for d, fn, ln in rows if fn == '?')
    print(f"--stacks {run}: replayed kernels: {right} of {total} at the function that created their node "
          f"({100.0 * right / total:.2f} %); {len(rows)} replayed kernels traced, {unplaced} without a site")
    if right < 0.99 * total or len(rows) != total:
        ok = False
meta = dict(c.execute("SELECT tag, value FROM rocpd_metadata WHERE tag LIKE 'python_%' OR tag LIKE 'stack%'"))
print(f"  {meta}")
sys.exit(0 if ok else 1)
EOF
done
fi

if has cost; then
hows=(none cpu python dwarf fp dwarf-nopy profiler profiler-stack)
: > "$OUT/sites_cost.jsonl"
for r in $(seq 1 "$REPS"); do
  for i in $(seq 0 $(( ${#hows[@]} - 1 ))); do
    how=${hows[$(( (i + r) % ${#hows[@]} ))]}
    meta="{\"how\": \"$how\", \"round\": $r}"
    app=(tests/gpu/app.py eager "$EAGER_N" --blocks 10 --out "$OUT/sites_cost.jsonl" --meta "$meta")
    case $how in
      none) "$PY" "${app[@]}" > /dev/null ;;
      profiler) "$PY" "${app[@]}" --profile > /dev/null ;;
      profiler-stack) "$PY" "${app[@]}" --profile-stack > /dev/null ;;
      cpu) "$BIN" run --force --runtime cuda --gpu none --quiet -o "$W/c.db" -- "$PY" "${app[@]}" > /dev/null 2> "$W/c.err" ;;
      python | dwarf | fp) "$BIN" run --force --runtime cuda --gpu none --quiet --stacks $how -o "$W/c.db" -- "$PY" "${app[@]}" > /dev/null 2> "$W/c.err" ;;
      dwarf-nopy) "$BIN" run --force --runtime cuda --gpu none --quiet --stacks dwarf --no-python-frames -o "$W/c.db" -- "$PY" "${app[@]}" \
                    > /dev/null 2> "$W/c.err" ;;
    esac
    [ $? = 0 ] || { log "cost run $how failed"; tail -3 "$W/c.err" >&2; rc=1; }
  done
  log "cost round $r done"
done
"$PY" - "$OUT/sites_cost.jsonl" <<'EOF'
import collections, json, statistics, sys
by = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l)
    by[r["how"]].append(r["per_unit_us"])
base = statistics.median(by["none"]) if by["none"] else float("nan")
cpu = statistics.median(by["cpu"]) if by["cpu"] else float("nan")
print("eager launch, us per launch (median of rounds; rounds):")
for how, v in by.items():
    m = statistics.median(v)
    print(f"  {how:15s} {m:7.2f}  (+{m - base:5.2f} over untraced, +{m - cpu:5.2f} over CPU-side tracing)  {[round(x, 2) for x in v]}")
EOF
fi
exit $rc
