#!/bin/bash
# The CUPTI GPU source on the H200 (as root, from the repository root; results under $OUT):
# 1. fixtures (FIXTURES=1): `app.py mix` traced with --gpu cupti, the agent's raw CUPTI records
#    (RTL_AGENT_CUPTI_DUMP) and wire batches (RTL_AGENT_DUMP), the trace's calls and op links
#    (extract_calls.py) -> $OUT/fixtures/;
# 2. eager 2000, graph 100 (50-kernel graph), transformer 10: torch.profiler alone (the
#    reference), then `run --runtime cuda --gpu cupti`, then torch.profiler started before CUDA
#    init (the duration reference under the agent's CUPTI conditions), each writing a line to
#    cupti.jsonl; analyze.py compares kernel counts, per-kernel GPU time (by name, in aggregate)
#    and links;
# 3. one run with torch.profiler on inside the traced process (two CUPTI clients).
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-.gpu/rtl-ebpf}
PY=${PY:-/opt/torch/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
OUT=${OUT:-/tmp/rtl-gpu-out}
W=/tmp/rtl-cupti; rm -rf "$W"; mkdir -p "$W" "$OUT"
APP=tests/gpu/app.py
export PYTHONUNBUFFERED=1
log() { echo "== $*" >&2; }
: > "$OUT/cupti.jsonl"
[ -f "$OUT/exit_codes.txt" ] || : > "$OUT/exit_codes.txt"
grep -qw cupti "$OUT/steps.txt" 2>/dev/null || echo "${STEPS:-cupti}" > "$OUT/steps.txt"
note_rc() { echo "$1 $2" >> "$OUT/exit_codes.txt"; echo "$1 rc=$2" >&2; }
if [ "${FIXTURES:-0}" = 1 ]; then
  log "fixtures"
  mkdir -p "$OUT/fixtures"
  : > "$OUT/fixture.jsonl"
  RTL_AGENT_CUPTI_DUMP=$W/cupti_raw.bin RTL_AGENT_DUMP=$W/agent_batches.bin RTL_AGENT_CUPTI_VERBOSE=1 \
    "$BIN" run --runtime cuda --gpu cupti --quiet -o "$W/fix.db" -- "$PY" $APP mix 2 --blocks 1 --out "$OUT/fixture.jsonl" \
    2> "$W/fix.err" > /dev/null
  note_rc fixture $?; head -c 3000 "$W/fix.err" >&2
  "$PY" tests/gpu/extract_calls.py "$W/fix.db" "$OUT/fixture.jsonl" "$OUT/fixtures" >&2
  cp "$W/cupti_raw.bin" "$W/agent_batches.bin" "$OUT/fixtures/"
  # The independent truth kept with the fixture: torch.profiler alone (its own CUPTI client; two
  # clients cannot share one process) on the same workload, twice: per-kernel-name counts and
  # GPU times (rtl-agent/tests/cupti_fixture.rs compares the agent's ops against them).
  for i in 1 2; do
    "$PY" $APP mix 2 --blocks 1 --profile --out "$OUT/fixtures/torch_profiler.jsonl" --meta '{"how": "torch.profiler"}' > /dev/null
    note_rc "fixture_torch_$i" $?
  done
  ls -la "$OUT/fixtures" >&2
  tar -C "$OUT" -czf "$OUT/fixtures.tar.gz" fixtures && rm -rf "$OUT/fixtures"
fi
for w in "eager 2000" "graph 100" "transformer 10"; do
  set -- $w
  log "cupti $1"
  # torch.profiler before and after the traced run (its own run-to-run spread is reported);
  # every run first warms the GPU for 1 s so that clocks are the same in all of them.
  "$PY" $APP $1 $2 --warm 1 --profile --out "$OUT/cupti.jsonl" --meta '{"how": "torch.profiler"}' > /dev/null
  db=$W/cupti_$1.db
  "$BIN" run --runtime cuda --gpu cupti --quiet -o "$db" -- "$PY" $APP $1 $2 --warm 1 --out "$OUT/cupti.jsonl" \
    --meta "{\"db\": \"$db\", \"how\": \"rtl-ebpf+cupti\"}" 2> "$W/cupti_$1.err" > /dev/null
  note_rc "cupti_$1" $?; grep -iE "error|cupti|agent|drop" "$W/cupti_$1.err" | cut -c1-300 | head -5 >&2
  # VARIANTS="label:VAR=value,VAR=value label2:..." runs the same with other agent settings
  # (diagnostics: RTL_AGENT_CUPTI_API=all, RTL_AGENT_CUPTI_CLOCK=cupti); rows labelled apart.
  for v in ${VARIANTS:-}; do
    label=${v%%:*}; envs=${v#*:}
    vdb=$W/cupti_$1_$label.db
    env ${envs//,/ } "$BIN" run --runtime cuda --gpu cupti --quiet -o "$vdb" -- "$PY" $APP $1 $2 --warm 1 --out "$OUT/cupti.jsonl" \
      --meta "{\"db\": \"$vdb\", \"how\": \"rtl-ebpf+cupti $label\"}" 2> "$W/cupti_$1_$label.err" > /dev/null
    note_rc "cupti_$1_$label" $?; grep -iE "error|cupti|agent|drop" "$W/cupti_$1_$label.err" | cut -c1-300 | head -3 >&2
  done
  "$PY" $APP $1 $2 --warm 1 --profile --out "$OUT/cupti.jsonl" --meta '{"how": "torch.profiler"}' > /dev/null
  # The duration reference under the agent's CUPTI conditions: torch.profiler on from before
  # CUDA init (CUPTI times ~1 us kernels ~50 ns longer then; analyze.py compares mean per kernel).
  "$PY" $APP $1 $2 --warm 1 --profile-early --out "$OUT/cupti.jsonl" --meta '{"how": "torch.profiler early"}' > /dev/null
done
log "cupti + torch.profiler in one process"
db=$W/cupti_same.db
"$BIN" run --runtime cuda --gpu cupti --quiet -o "$db" -- "$PY" $APP eager 2000 --profile --out "$OUT/cupti.jsonl" \
  --meta "{\"db\": \"$db\", \"how\": \"rtl-ebpf+cupti+torch.profiler, one process\"}" 2> "$W/cupti_same.err" > /dev/null
note_rc cupti_same $?; grep -iE "error|cupti|agent" "$W/cupti_same.err" | cut -c1-300 | head -5 >&2
for f in counts overhead; do [ -f "$OUT/$f.jsonl" ] || : > "$OUT/$f.jsonl"; done
tar -C "$W" -czf "$OUT/cupti_traces.tar.gz" cupti_eager.db cupti_graph.db cupti_transformer.db cupti_same.db cupti_eager.err cupti_same.err 2>/dev/null
