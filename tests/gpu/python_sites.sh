#!/bin/bash
# Python call sites (issue 17) with another CPython than this machine's 3.11: the same check as
# rtl-user's `python_sites::*` tests (tests/workloads/python_sites.py on the ROCm simulator,
# through ctypes; no GPU needed), for the interpreter named by $PY (e.g. the H200's Python 3.12).
#
#   PY=/usr/bin/python3.12 bash tests/gpu/python_sites.sh      (as root, from the repository root)
#
# LINGER (seconds, default 0, as the tests): the workload stays alive that long after its last
# call. Names come from the probe's copies of the code objects, so none is needed; a linger only
# lets the live process fill in what a copy lacks (a line past a cut line table, a long name).
#
# Carried: .gpu/rtl-ebpf (see graph_cost.sh) and the built simulator tests/rocm-sim/build/lib.
# Prints, per --stacks mode, the calls whose recorded site is the workload's own (function, line)
# against its truth, and the python_* counters; exits 1 when one call's site is wrong or missing
# or one Python frame is unnamed (python_frames_unresolved).
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-.gpu/rtl-ebpf}
PY=${PY:-python3}
REPS=${REPS:-25}
LINGER=${LINGER:-0}
SIM=tests/rocm-sim/build/lib
OUT=${OUT:-/tmp/rtl-gpu-out}
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "no $BIN" >&2; exit 2; }
[ -e "$SIM/libamdhip64.so.5" ] || { echo "no $SIM (make -C tests/rocm-sim, then carry it)" >&2; exit 2; }
"$PY" --version
rc=0
for mode in dwarf fp; do
  W=$(mktemp -d)
  LD_LIBRARY_PATH="$PWD/$SIM${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BIN" run --quiet --stacks $mode -o "$W/t.db" -- \
    "$PY" tests/workloads/python_sites.py --reps "$REPS" --linger "$LINGER" --truth "$W/truth.tsv" > "$W/out" 2> "$W/err" < /dev/null
  st=$?
  if [ $st != 0 ]; then
    echo "$mode: rtl-ebpf run failed (exit $st):"; tail -n 5 "$W/out" "$W/err"; rc=1; continue
  fi
  cp "$W/t.db" "$OUT/python_sites_$mode.db"
  "$PY" - "$W/t.db" "$W/truth.tsv" "$mode" <<'EOF' || rc=1
import collections, sqlite3, sys
db, truth, mode = sys.argv[1:]
want = collections.Counter()
for line in open(truth):
    api, fn, ln, n = line.rstrip("\n").split("\t")
    want[(api, fn, int(ln))] += int(n)
c = sqlite3.connect(db)
got = collections.Counter()
for api, fn, ln in c.execute(
        "SELECT a.apiName, coalesce(f.symbol, '?'), coalesce(p.line, -1) FROM api a JOIN rtl_api_stack s ON s.api_id = a.id "
        "JOIN rtl_stack st ON st.id = s.stack_id LEFT JOIN rtl_frame f ON f.id = st.site_frame_id "
        "LEFT JOIN rtl_python_frame p ON p.frame_id = f.id"):
    got[(api, fn, ln)] += 1
right = sum(min(n, got[k]) for k, n in want.items())
total = sum(want.values())
meta = dict(c.execute("SELECT tag, value FROM rocpd_metadata WHERE tag LIKE 'python_%' OR tag = 'stacks_without_call'"))
print(f"--stacks {mode}: {right} of {total} calls at their own Python function and line ({100.0 * right / max(total, 1):.2f} %); {meta}")
for k in sorted(set(want) | set(got)):
    if want[k] != got[k]:
        print(f"  {k}: truth {want[k]}, trace {got[k]}")
sys.exit(0 if right == total and sum(got.values()) == total and meta.get("python_frames_unresolved") == "0" else 1)
EOF
  rm -rf "$W"
done
exit $rc
