#!/bin/bash
# Builds the workloads, runs each with its defaults and validates its truth
# (tools/check_truth.py: JSON, seq, summaries, exact expected totals).
#   tests/workloads/selftest.sh              # on Debian's real libamdhip64 (no GPU: calls fail)
#   tests/workloads/selftest.sh --sim DIR    # on the simulator (DIR = tests/rocm-sim/build/lib)
# Last line: "N passed, M failed"; exit 0 when none failed.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$HERE/build
SIM=
if [ "${1:-}" = --sim ]; then SIM=$(cd "$2" && pwd); shift 2; fi
make -C "$HERE" -s >/dev/null || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if [ -n "$SIM" ]; then export LD_LIBRARY_PATH=$SIM; else unset LD_LIBRARY_PATH; fi
pass=0 fail=0
# name, expected exit code, expected total calls (real library), (simulator) or -, summaries, command...
run() {
    local name=$1 code=$2 real=$3 sim=$4 procs=$5; shift 5
    local want=$real; [ -n "$SIM" ] && want=$sim
    local F=$T/$name.jsonl
    RTL_WORKLOAD_TRUTH=$F timeout 120 "$@" >"$T/$name.out" 2>"$T/$name.err"
    local rc=$?
    if [ $rc -ne "$code" ]; then
        echo "FAIL $name: exit $rc, expected $code"; tail -3 "$T/$name.err"; fail=$((fail + 1)); return
    fi
    local exp=(--expect-procs "$procs"); [ "$want" != - ] && exp+=(--expect-total "$want")
    if python3 "$HERE/tools/check_truth.py" "$F" "${exp[@]}" >"$T/$name.chk"; then
        echo "ok   $name: $(tail -1 "$T/$name.chk" | sed 's/^.*: \([0-9]* lines\)/\1/')"; pass=$((pass + 1))
    else
        echo "FAIL $name"; cat "$T/$name.chk"; fail=$((fail + 1))
    fi
}
run api_mix 0 253 253 1 "$B/api_mix"
run api_mix_exit 5 85 85 1 "$B/api_mix" --threads 2 --reps 1 --exit-code 5
run forker 0 384 384 6 "$B/forker"
run forker_exit 7 0 0 1 "$B/forker" --children 0 --exec 0 --parent-threads 0 --exit-code 7
run api_wide 0 40 40 1 "$B/api_wide"
# real library only: the simulator does not export the activity callback functions
if [ -z "$SIM" ]; then run ret_kinds 0 18 - 1 "$B/ret_kinds"; fi
run hot_loop 0 2000 2000 1 "$B/hot_loop" --threads 2 --calls 1000
run hot_loop_ges 0 10000 10000 1 "$B/hot_loop" --api geterrorstring --calls 10000
run demo 0 81 103 1 "$B/demo"
run graph_replay 0 438 650 1 "$B/graph_replay"
run serve_sim 0 6480 9240 9 "$B/serve_sim"
run launch_storm 0 872 1448 2 "$B/launch_storm"
run copy_graph 0 773 973 1 "$B/copy_graph"
# two images of one pid (exec_mid_call, then api_mix); the first image's count is timing-dependent
run exec_mid_call 0 - - 2 "$B/exec_mid_call" --threads 2 --delay-ms 100

# sleeper: init (3 calls), one SIGUSR1 batch (43 calls), SIGTERM -> summary, exit 0
F=$T/sleeper.jsonl
RTL_WORKLOAD_TRUTH=$F "$B/sleeper" >"$T/sleeper.out" 2>&1 &
SP=$!
for _ in $(seq 100); do grep -q '"ready":true' "$T/sleeper.out" 2>/dev/null && break; sleep 0.05; done
kill -USR1 $SP
for _ in $(seq 200); do grep -q '"batch":1' "$T/sleeper.out" 2>/dev/null && break; sleep 0.05; done
kill -TERM $SP
wait $SP
rc=$?
if [ $rc -eq 0 ] && python3 "$HERE/tools/check_truth.py" "$F" --expect-total 46 --expect-procs 1 >"$T/sl.chk"; then
    echo "ok   sleeper: $(tail -1 "$T/sl.chk" | sed 's/^.*: \([0-9]* lines\)/\1/')"; pass=$((pass + 1))
else
    echo "FAIL sleeper (exit $rc)"; cat "$T/sl.chk" 2>/dev/null; fail=$((fail + 1))
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
