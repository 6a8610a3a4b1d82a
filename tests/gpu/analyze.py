"""Reads tests/gpu/run.sh's results (JSON lines from app.py, rtl-ebpf traces) and prints the
tables: launch counts (rtl-ebpf vs torch.profiler, same run) and overhead (medians)."""
import json, sqlite3, statistics, sys
from collections import defaultdict

LAUNCH = ("cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz",
          "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz")
GRAPH = ("cuGraphLaunch", "cuGraphLaunch_ptsz")
BEGIN = ("cuStreamBeginCapture_v2", "cuStreamBeginCapture_ptsz")
END = ("cuStreamEndCapture", "cuStreamEndCapture_ptsz")
INST = ("cuGraphInstantiateWithFlags", "cuGraphInstantiate_v2")


def rows(db, pid):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    q = """SELECT a.id, a.tid, a.start, a.end, a.apiName, r.a0, r.a1, k.kernelName
           FROM api a LEFT JOIN rtl_api r ON r.api_id = a.id LEFT JOIN kernel k ON k.id = a.id
           WHERE a.pid = ? ORDER BY a.start"""
    return [dict(zip(("id", "tid", "start", "end", "name", "a0", "a1", "kname"), r)) for r in c.execute(q, (pid,))]


def count(db, res):
    """Kernels rtl-ebpf saw launched in the app's measured region: direct launches, plus graph
    replays times the launches captured into that graph (stream capture, earlier in the trace)."""
    rs = rows(db, res["pid"])
    nodes_of_graph, graph_of_exec, cap = {}, {}, {}
    for r in rs:
        if r["name"] in BEGIN:
            cap[r["tid"]] = [0, r]
        elif r["name"] in END and r["tid"] in cap:
            nodes_of_graph[r["a0"]] = cap.pop(r["tid"])[0]
        elif r["name"] in LAUNCH and r["tid"] in cap:
            cap[r["tid"]][0] += 1
        elif r["name"] in INST:
            graph_of_exec[r["a0"]] = r["a1"]
    inside = [r for r in rs if res["t0"] <= r["start"] <= res["t1"]]
    launches = [r for r in inside if r["name"] in LAUNCH]
    named = sum(1 for r in launches if r["kname"])
    replays = [r for r in inside if r["name"] in GRAPH]
    per = [nodes_of_graph.get(graph_of_exec.get(r["a0"]), None) for r in replays]
    graph_kernels = sum(n for n in per if n is not None)
    return dict(launches=len(launches), named=named, replays=len(replays), unmapped_replays=sum(n is None for n in per),
                kernels=len(launches) + graph_kernels, nodes=sorted(set(n for n in per if n is not None)))


def load(path):
    out = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def main(outdir):
    lines = []
    say = lambda s="": (print(s), lines.append(s))
    # Counts: each count run is traced by rtl-ebpf with torch.profiler on, same process.
    say("### Kernel counts, same run (rtl-ebpf `run --runtime cuda` with torch.profiler on)")
    say()
    say("| workload | trace | app launched | torch.profiler kernels | rtl-ebpf launches | graph replays x nodes | rtl-ebpf kernels | named | equal |")
    say("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ok = True
    for r in load(f"{outdir}/counts.jsonl"):
        try:
            c = count(r["db"], r)
        except Exception as e:  # no trace (the tracer failed): say so, keep going
            ok = False
            say(f"| {r['mode']} {r['n']} | {r['how']} | no trace: {e} | | | | | | NO |")
            continue
        prof = r.get("profiler_kernels")
        eq = prof is None or c["kernels"] == prof
        exp_ok = r.get("expect_kernels") is None or r["expect_kernels"] == c["kernels"]
        ok &= eq and exp_ok and c["unmapped_replays"] == 0
        say(f"| {r['mode']} {r['n']} | {r['how']} | {r.get('expect_kernels') or '-'} | {prof if prof is not None else '-'} | "
            f"{c['launches']} | {c['replays']} x {c['nodes'] or '-'} | {c['kernels']} | {c['named']}/{c['launches']} | "
            f"{'yes' if eq and exp_ok else 'NO'} |")
    say()
    # Overhead: medians over interleaved repeated runs.
    ov = defaultdict(list)
    for r in load(f"{outdir}/overhead.jsonl"):
        ov[(r["mode"], r["how"])].append(r)
    say("### Overhead (medians over interleaved runs; per run the median of its timed blocks)")
    say()
    say("| run | eager launch, us/kernel | graph replay (50 kernels), us/replay CPU | graph replay, us/replay GPU (events) | runs |")
    say("| --- | --- | --- | --- | --- |")
    base = {}
    for how in ("none", "rtl-ebpf", "torch.profiler"):
        e, g = ov.get(("eager", how), []), ov.get(("graph", how), [])
        med = lambda v, k: statistics.median(x[k] for x in v) if v else float("nan")
        cells = [med(e, "per_unit_us"), med(g, "per_unit_us"), med(g, "gpu_us_per_unit")]
        if how == "none":
            base = cells
        d = lambda i: "" if how == "none" else f" ({cells[i] - base[i]:+.2f})"
        say(f"| {how} | {cells[0]:.2f}{d(0)} | {cells[1]:.2f}{d(1)} | {cells[2]:.2f}{d(2)} | {len(e)}+{len(g)} |")
    say()
    say("raw (us/unit per run): " + "; ".join(
        f"{m}/{h}: " + ",".join(f"{x['per_unit_us']:.2f}" for x in v) for (m, h), v in sorted(ov.items())))
    open(f"{outdir}/table.md", "w").write("\n".join(lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
