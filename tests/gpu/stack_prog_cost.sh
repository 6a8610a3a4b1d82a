#!/bin/bash
# In-kernel cost of call sites per PyTorch launch on the GPU machine (issue 17): the probe
# programs' run time (kernel.bpf_stats_enabled, summed over the collector's programs) per
# launch of tests/gpu/app.py eager, for CPU-side tracing and each --stacks mode (python, fp, dwarf). The programs
# run on the launching thread, inside the call: this is what stacks add to every launch,
# without the process-to-process spread of wall-clock timings (several us between two runs of
# one configuration on the H200).
#
#   bash tests/gpu/stack_prog_cost.sh      (as root, from the repository root)
# Env: BIN (.gpu/rtl-ebpf), PY, REPS (rounds, 3), EAGER_N (20000).
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-.gpu/rtl-ebpf}
PY=${PY:-/opt/torch/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
REPS=${REPS:-3}
EAGER_N=${EAGER_N:-20000}
W=$(mktemp -d)
was=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -q -w kernel.bpf_stats_enabled=1
trap 'sysctl -q -w kernel.bpf_stats_enabled=$was; rm -rf "$W"' EXIT
# Sum of run_time_ns over a process's BPF program fds.
prog_ns() { cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^run_time_ns:/ { t += $2 } END { print t + 0 }'; }
hows=(cpu python fp dwarf dwarf-nopy)
declare -A R
for r in $(seq 1 "$REPS"); do
  for i in $(seq 0 $(( ${#hows[@]} - 1 ))); do
    how=${hows[$(( (i + r) % ${#hows[@]} ))]}
    case $how in
      cpu) extra=() ;;
      dwarf-nopy) extra=(--stacks dwarf --no-python-frames) ;;
      *) extra=(--stacks "$how") ;;
    esac
    # The command stays 1 s after the app: the programs' time is sampled then, after every
    # launch and before the collector closes its programs.
    "$BIN" run --force --runtime cuda --gpu none --quiet "${extra[@]}" -o "$W/c.db" -- \
      sh -c '"$@" && sleep 1' sh "$PY" tests/gpu/app.py eager "$EAGER_N" --blocks 10 > /dev/null 2> "$W/c.err" &
    c=$!
    last=0
    # The collector's programs' time, sampled until it exits (the largest sample: after the
    # app's launches, before the collector closes its programs).
    while kill -0 $c 2>/dev/null; do v=$(prog_ns $c); [ "${v:-0}" -gt "$last" ] && last=$v; sleep 0.05; done
    wait $c || { echo "run $how failed" >&2; tail -3 "$W/c.err" >&2; exit 1; }
    # Launches: the most calls of one launch API (a runtime launch may also be traced as the
    # driver call it makes).
    n=$("$PY" -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT coalesce(max(c), 0) FROM (SELECT count(*) c FROM api WHERE apiName LIKE ? OR apiName LIKE ? GROUP BY apiName)", ("cudaLaunchKernel%", "cuLaunchKernel%")).fetchone()[0])' "$W/c.db")
    R[$how]+="$(awk -v t="$last" -v n="$n" 'BEGIN { printf "%.0f", (n > 0 ? t / n : 0) }') "
  done
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cpu=$(echo "${R[cpu]}" | med)
echo "stack-prog-cost: probe programs' ns per launch (all programs' run time / launches), app.py eager $EAGER_N, $REPS rounds, medians"
for how in "${hows[@]}"; do
  m=$(echo "${R[$how]}" | med)
  echo "  $how: $m ns per launch (+$((m - cpu)) over CPU-side tracing)  rounds [${R[$how]}]"
done
