#!/bin/bash
# Cross-checks a workload's ground truth against an independent bpftrace uprobe count
# per (pid, tid, api) on the HIP library.  Needs root and bpftrace.
#   tools/uprobe_crosscheck.sh [--lib PATH] -- /abs/path/to/build/WORKLOAD ARGS...
# Exit 0 when every (pid, tid, api) count matches (roctx calls and the
# __hipRegister*/__hipUnregister* constructor calls are not compared).
set -euo pipefail
LIB=/usr/lib/x86_64-linux-gnu/libamdhip64.so.5
if [ "${1:-}" = --lib ]; then LIB=$2; shift 2; fi
[ "${1:-}" = -- ] && shift
[ $# -ge 1 ] || { echo "usage: $0 [--lib PATH] -- /abs/path/WORKLOAD ARGS..." >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export RTL_WORKLOAD_TRUTH=$TMP/truth.jsonl
COMMS='comm == "api_mix" || comm == "forker" || comm == "serve_sim" || comm == "graph_replay" || comm == "demo" || comm == "api_wide" || comm == "sleeper" || comm == "hot_loop"'
bpftrace -e "uprobe:$LIB:hip*,uprobe:$LIB:__hipPushCallConfiguration,uprobe:$LIB:__hipPopCallConfiguration /$COMMS/ { @[pid, tid, probe] = count(); }" \
    -c "$*" 2>"$TMP/bt.err" >"$TMP/bt.txt" || { cat "$TMP/bt.err" >&2; exit 1; }
python3 - "$TMP" <<'PY'
import collections, json, re, sys
d = sys.argv[1]
truth, pids = collections.Counter(), set()
for l in open(d + '/truth.jsonl'):
    r = json.loads(l)
    pids.add(r['pid'])
    if 'api' not in r or r['api'].startswith('roctx') or r['api'] == 'hot_loop_baseline':
        continue
    if 'seq' in r:
        truth[(r['pid'], r['tid'], r['api'])] += 1
    elif r.get('aggregate'):
        truth[(r['pid'], r['tid'], r['api'])] += r['calls']
bt = collections.Counter()
for l in open(d + '/bt.txt'):
    m = re.match(r'@\[(\d+), (\d+), uprobe:[^:]+:(\S+)\]: (\d+)', l)
    # skip the constructor-time registration calls and local C++ symbols bpftrace's glob also matches
    if m and int(m[1]) in pids and not m[3].startswith(('__hipRegister', '__hipUnregister', '_Z')):
        bt[(int(m[1]), int(m[2]), m[3])] += int(m[4])
diff = {k: (truth[k], bt[k]) for k in set(truth) | set(bt) if truth[k] != bt[k]}
print(f"truth {sum(truth.values())} calls, uprobes {sum(bt.values())} calls, {len(pids)} processes, {len(diff)} mismatches")
for k, v in sorted(diff.items())[:30]:
    print("  pid %d tid %d %s: truth %d, uprobe %d" % (k + v))
sys.exit(1 if diff else 0)
PY
