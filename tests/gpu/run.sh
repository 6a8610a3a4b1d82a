#!/bin/bash
# The CUDA profile's validation on the GPU machine, in one call. Builds nothing: it runs the
# carried binary (default .gpu/rtl-ebpf, a stripped copy of target/release/rtl-ebpf).
#
#   bash tests/gpu/run.sh            (as root, from the repository root; results under $OUT)
#
# 1. counts: eager loop, CUDA-graph replay (50 kernels), small transformer forward, each traced by
#    `rtl-ebpf run --runtime cuda` with torch.profiler on in the same process: kernels rtl-ebpf
#    saw launched (cuLaunchKernel* rows + graph replays x captured launches) vs the profiler's.
# 2. `attach --pid` and `--all` once each on the eager loop.
# 3. overhead: eager launch and graph replay latency with no tracing / under rtl-ebpf (CPU side,
#    --gpu none) / under rtl-ebpf with the CUPTI agent (--gpu cupti) / under torch.profiler,
#    REPS interleaved rounds, medians.
# 4. the CUPTI GPU source (tests/gpu/cupti.sh): kernel counts, per-kernel GPU time and links
#    against torch.profiler; FIXTURES=1 also records the test fixtures.
# Env: BIN, PY, REPS (2 fits one 10-minute call with steps 1-4; 0 skips step 3), EAGER_N (10000),
# GRAPH_R (1000), OUT, STEPS (default "counts attach overhead cupti").
# Time: steps 1-2 take about a minute; each overhead round about two minutes, mostly waiting for
# the kernel to remove the previous traced run's ~170 uprobes (RCU grace periods, one at a time)
# before the next untraced run, which would otherwise still pay the quiesced probes' traps.
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-.gpu/rtl-ebpf}
PY=${PY:-/opt/torch/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
OUT=${OUT:-/tmp/rtl-gpu-out}
REPS=${REPS:-2}
STEPS=${STEPS:-counts attach overhead cupti}
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
EAGER_N=${EAGER_N:-10000}
GRAPH_R=${GRAPH_R:-1000}
W=/tmp/rtl-gpu; rm -rf "$W"; mkdir -p "$W" "$OUT"
APP=tests/gpu/app.py
export PYTHONUNBUFFERED=1
log() { echo "== $*" >&2; }
: > "$OUT/counts.jsonl"; : > "$OUT/overhead.jsonl"; : > "$OUT/exit_codes.txt"
# analyze.py expects the rows of these steps and fails on any missing one and on any nonzero
# exit code noted here (a run that did not happen is a failure, never an empty table).
echo "$STEPS" > "$OUT/steps.txt"
note_rc() { echo "$1 $2" >> "$OUT/exit_codes.txt"; echo "$1 rc=$2" >&2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >&2 || true
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" >&2
"$BIN" list-apis --runtime cuda | tail -1 >&2

# Waits until the probes a finished rtl-ebpf left to its background remover are gone (quiesced
# probes still trap: the next untraced run must not pay for them).
wait_released() {
  local pid; pid=$(grep -o "background (pid [0-9]*" "$1" 2>/dev/null | grep -o "[0-9]*$")
  [ -n "$pid" ] || return 0
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  log "probe remover $pid still running after 60 s"
}
# Waits until a background rtl-ebpf's log says its probes are in place.
wait_probed() { for _ in $(seq 300); do grep -q "functions probed" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# 1. Counts, same run (CPU side only: torch.profiler is a CUPTI client, and CUPTI has one).
has counts && for w in "eager 2000" "graph 100" "transformer 10"; do
  set -- $w
  db=$W/count_$1.db
  log "count $1"
  "$BIN" run --runtime cuda --gpu none --quiet -o "$db" -- "$PY" $APP $1 $2 --profile --out "$OUT/counts.jsonl" \
     --meta "{\"db\": \"$db\", \"how\": \"run\"}" 2> "$W/count_$1.err" >/dev/null
  note_rc "count_$1" $?; grep -E "attached|probed|error|Error" "$W/count_$1.err" | cut -c1-300 >&2
done

# 2a. attach --pid: the app initialises CUDA, says ready, waits for the go file.
if has attach; then
log "attach --pid"
rm -f "$W/go"; "$PY" $APP eager 2000 --wait "$W/go" --out "$OUT/counts.jsonl" \
   --meta "{\"db\": \"$W/attach.db\", \"how\": \"attach --pid\"}" > "$W/attach_app.out" &
app=$!
for _ in $(seq 300); do grep -q ready "$W/attach_app.out" 2>/dev/null && break; sleep 0.1; done
"$BIN" attach --pid $app --runtime cuda --quiet -o "$W/attach.db" 2> "$W/attach.err" &
tracer=$!
wait_probed "$W/attach.err" || { log "attach did not come up"; note_rc attach_probed 1; }
touch "$W/go"; wait $app; note_rc attach_app $?; sleep 0.3; kill -TERM $tracer; wait $tracer; note_rc attach $?
grep -E "attached|probed|error" "$W/attach.err" | cut -c1-300 >&2

# 2b. --all: system-wide, then the app starts.
log "--all"
"$BIN" --all --runtime cuda --quiet -o "$W/all.db" 2> "$W/all.err" &
tracer=$!
wait_probed "$W/all.err" || { log "--all did not come up"; note_rc all_probed 1; }
"$PY" $APP eager 2000 --out "$OUT/counts.jsonl" --meta "{\"db\": \"$W/all.db\", \"how\": \"--all\"}" > /dev/null
note_rc all_app $?
sleep 1.5  # --all attaches to newly mapped copies on its 1 s rescan; the system libcuda is probed from the start
kill -TERM $tracer; wait $tracer; note_rc all $?
grep -E "attached|probed|error" "$W/all.err" | cut -c1-300 >&2
fi

# 3. Overhead, interleaved (the order rotates each round).
hows=(none rtl-ebpf "rtl-ebpf + CUPTI agent" torch.profiler)
has overhead || REPS=0
for r in $(seq 1 "$REPS"); do
  for i in 0 1 2 3; do
    how=${hows[$(( (i + r) % 4 ))]}
    for w in "eager $EAGER_N" "graph $GRAPH_R"; do
      set -- $w
      meta="{\"how\": \"$how\", \"round\": $r}"
      case $how in
        none) "$PY" $APP $1 $2 --blocks 10 --out "$OUT/overhead.jsonl" --meta "$meta" >/dev/null ;;
        torch.profiler) "$PY" $APP $1 $2 --blocks 10 --profile --out "$OUT/overhead.jsonl" --meta "$meta" >/dev/null ;;
        rtl-ebpf) "$BIN" run --runtime cuda --gpu none --quiet -o "$W/ov_$1_$r.db" -- "$PY" $APP $1 $2 --blocks 10 \
                     --out "$OUT/overhead.jsonl" --meta "$meta" > /dev/null 2> "$W/ov_$1_$r.err"
                   note_rc "ov_$1_$r" $?
                   wait_released "$W/ov_$1_$r.err" ;;
        "rtl-ebpf + CUPTI agent") "$BIN" run --runtime cuda --gpu cupti --quiet -o "$W/ovc_$1_$r.db" -- "$PY" $APP $1 $2 \
                     --blocks 10 --out "$OUT/overhead.jsonl" --meta "$meta" > /dev/null 2> "$W/ovc_$1_$r.err"
                   note_rc "ovc_$1_$r" $?
                   wait_released "$W/ovc_$1_$r.err" ;;
      esac
    done
  done
  log "overhead round $r done"
done

# 4. The CUPTI GPU source.
has cupti && OUT=$OUT BIN=$BIN PY=$PY bash tests/gpu/cupti.sh

echo "$REPS" > "$OUT/reps.txt"
"$PY" tests/gpu/analyze.py "$OUT"; rc=$?
# Summaries of two traces, and the small traces themselves.
"$BIN" summary "$W/count_transformer.db" --top 8 > "$OUT/summary_transformer.txt" 2>&1
"$BIN" summary "$W/ov_eager_1.db" --top 5 >> "$OUT/summary_transformer.txt" 2>&1
"$BIN" summary /tmp/rtl-cupti/cupti_transformer.db --top 5 >> "$OUT/summary_transformer.txt" 2>&1
sed -i "s#$W/#traces/#g" "$OUT/counts.jsonl"
tar -C "$W" -czf "$OUT/traces.tar.gz" --transform 's#^#traces/#' count_eager.db count_graph.db count_transformer.db attach.db all.db \
    count_transformer.err attach.err all.err 2>/dev/null
ls -la "$OUT" >&2
exit $rc
