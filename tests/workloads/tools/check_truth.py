#!/usr/bin/env python3
"""Validates a workload truth file (see ../README.md, "Truth format").

usage: check_truth.py FILE [--expect-total N] [--expect-procs N]

Checks: every line is a JSON object of a known kind; call lines have the common fields,
start_ns <= end_ns, per-(pid,tid) seq numbers are 0..n-1 in file order and their
start_ns never go backwards; every process has exactly one summary line and it equals
the calls counted from its call/aggregate lines.  --expect-total: the sum of all
summaries' totals; --expect-procs: number of summary lines.  Prints one line, exit 0/1."""
import collections
import json
import sys


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    path = args[0]
    expect_total = expect_procs = None
    if '--expect-total' in args:
        expect_total = int(args[args.index('--expect-total') + 1])
    if '--expect-procs' in args:
        expect_procs = int(args[args.index('--expect-procs') + 1])
    errors = []
    counted = collections.defaultdict(collections.Counter)
    summaries = {}
    seqs = collections.defaultdict(list)
    last_start = {}
    n_lines = 0
    with open(path) as f:
        for i, line in enumerate(f, 1):
            n_lines += 1
            try:
                r = json.loads(line)
            except ValueError as e:
                errors.append(f'line {i}: not JSON: {e}')
                continue
            if not isinstance(r, dict) or 'pid' not in r:
                errors.append(f'line {i}: not an object with a pid')
                continue
            pid = r['pid']
            if 'summary' in r:
                if pid in summaries:
                    errors.append(f'line {i}: second summary for pid {pid}')
                summaries[pid] = r
            elif 'note' in r:
                if r['note'] == 'exec':
                    # the process image ends here (exec_mid_call); its pid lives on
                    img = (pid, 'image', i)
                    if pid in counted:
                        counted[img] = counted.pop(pid)
                    if pid in summaries:
                        summaries[img] = summaries.pop(pid)
            elif r.get('aggregate'):
                counted[pid][r['api']] += r['calls']
            elif 'seq' in r:
                for k in ('tid', 'api', 'ret', 'start_ns', 'end_ns'):
                    if k not in r:
                        errors.append(f'line {i}: call without {k}')
                if r['start_ns'] > r['end_ns']:
                    errors.append(f'line {i}: start_ns > end_ns')
                key = (pid, r['tid'])
                seqs[key].append(r['seq'])
                if last_start.get(key, 0) > r['start_ns']:
                    errors.append(f'line {i}: start_ns went backwards on pid {pid} tid {r["tid"]}')
                last_start[key] = r['start_ns']
                counted[pid][r['api']] += 1
            else:
                errors.append(f'line {i}: unknown record kind')
    for key, s in seqs.items():
        if s != list(range(len(s))):
            errors.append(f'pid {key[0]} tid {key[1]}: seq not 0..{len(s) - 1} in order')
    for pid in set(counted) | set(summaries):
        if pid not in summaries:
            errors.append(f'pid {pid}: no summary line')
            continue
        sm = summaries[pid]
        if dict(counted[pid]) != sm['summary']:
            errors.append(f'pid {pid}: summary {sm["summary"]} != counted {dict(counted[pid])}')
        if sum(sm['summary'].values()) != sm['total']:
            errors.append(f'pid {pid}: total mismatch')
    total = sum(s['total'] for s in summaries.values())
    if expect_total is not None and total != expect_total:
        errors.append(f'total calls {total}, expected {expect_total}')
    if expect_procs is not None and len(summaries) != expect_procs:
        errors.append(f'{len(summaries)} processes, expected {expect_procs}')
    for e in errors[:20]:
        print('  ' + e)
    print(f'{path}: {n_lines} lines, {len(summaries)} processes, {total} calls: '
          + ('OK' if not errors else f'{len(errors)} ERRORS'))
    return 1 if errors else 0


sys.exit(main())
