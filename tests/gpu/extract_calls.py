"""Writes the collector-side CUPTI fixture from a `run --gpu cupti` trace of `app.py mix`:
calls.tsv (the eBPF-recorded calls of the app's process that can put work on a GPU queue:
launches, graph launches, copies, memsets) and ops.tsv (every GPU op the live run wrote, with
the API row it linked to and that row's status). Usage: extract_calls.py TRACE.db RESULT.jsonl DIR"""
import json, re, sqlite3, sys

db, result, out = sys.argv[1:4]
res = [json.loads(l) for l in open(result) if l.startswith("{")][-1]
c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
fam = re.compile(r"^cu(da)?(GraphLaunch|Launch|Memcpy|Memset)")
with open(f"{out}/calls.tsv", "w") as f:
    f.write("id\tpid\ttid\tstart\tend\tname\n")
    for row in c.execute("""SELECT a.id, a.pid, a.tid, a.start, a.end, a.apiName FROM api a LEFT JOIN rtl_api r ON r.api_id = a.id
                            WHERE a.pid = ? AND coalesce(r.status, 0) != 5 ORDER BY a.end""", (res["pid"],)):
        if fam.match(row[5]):
            f.write("\t".join(map(str, row)) + "\n")
with open(f"{out}/ops.tsv", "w") as f:
    f.write("seq\tstart\tend\topType\tapi_id\tapi_status\n")
    for row in c.execute("""SELECT o.sequenceId, o.start, o.end, o.opType, ao.api_id, coalesce(r.status, 0)
                            FROM op o LEFT JOIN rocpd_api_ops ao ON ao.op_id = o.id LEFT JOIN rtl_api r ON r.api_id = ao.api_id
                            WHERE o.opType NOT IN ('UserMarker') ORDER BY o.start"""):
        f.write("\t".join("" if v is None else str(v) for v in row) + "\n")
json.dump(res, open(f"{out}/app.json", "w"))
print(open(f"{out}/calls.tsv").read().count("\n") - 1, "calls,", open(f"{out}/ops.tsv").read().count("\n") - 1, "ops")
