#!/usr/bin/env python3
"""rocm-sim self-test: checks a ground-truth file (ROCM_SIM_TRUTH) for internal consistency and,
optionally, that hipProfiler*Ext records (as dumped by prof_consumer) match it exactly.

usage: check_truth.py TRUTH.jsonl [--profiler RECORDS.jsonl] [--expect-ops N] [--kernel-ns NAME=NS ...]
Prints one line per failed check and a summary; exit status 1 on any failure.
"""
import argparse
import collections
import json
import sys

fails = []


def fail(msg):
    fails.append(msg)
    if len(fails) <= 30:
        print("check_truth: FAIL " + msg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("--profiler")
    ap.add_argument("--expect-ops", type=int)
    ap.add_argument("--expect-graph-batch", help="graph launches must have this many ops each (comma list of allowed sizes)")
    ap.add_argument("--hsa-tool", help="HSA_SIM_TOOL_OUT of tests/hsa_tool.cpp: dispatch times must equal the truth")
    ap.add_argument("--hsa-tool-graph", action="store_true", help="the tool also captured graph dispatches")
    ap.add_argument("--kernel-ns", action="append", default=[])
    ap.add_argument("--default-kernel-ns", type=int, default=5000)
    ap.add_argument("--copy-base-ns", type=int, default=2000)
    ap.add_argument("--copy-bytes-per-us", type=int, default=16384)
    a = ap.parse_args()

    apis, ops, replays = [], [], []
    with open(a.truth) as f:
        for ln, line in enumerate(f, 1):
            try:
                o = json.loads(line)
            except Exception as e:  # noqa
                fail(f"line {ln} is not JSON: {e}")
                continue
            {"api": apis, "replay": replays}.get(o.get("type"), ops).append(o)
    for o in apis:
        for k in ("name", "pid", "tid", "thread_hash", "start", "end", "ret"):
            if k not in o:
                fail(f"api line without {k}: {o}")
        if o.get("lib") != "roctx" and "seq" not in o:
            fail(f"api line without seq: {o}")
        if o["end"] < o["start"]:
            fail(f"api end < start: {o}")
    if not apis:
        fail("the truth file has no API calls (an empty or missing truth passes nothing)")
    api_by = {(o["pid"], o["seq"]): o for o in apis if o.get("lib") != "roctx"}

    kernel_ns = {}
    for kv in a.kernel_ns:
        k, v = kv.rsplit("=", 1)
        kernel_ns[k] = int(v)

    # 1. every op belongs to an API call of its process, starts after that call began
    for o in ops:
        for k in ("op", "pid", "device", "queue", "start", "end", "api_seq", "api", "api_tid", "is_graph"):
            if k not in o:
                fail(f"op line without {k}: {o}")
        if o["end"] < o["start"]:
            fail(f"op end < start: {o}")
        src = api_by.get((o["pid"], o["api_seq"]))
        if not src:
            fail(f"op without its API call: {o}")
            continue
        if src["name"] != o["api"]:
            fail(f"op api name {o['api']} != {src['name']}")
        if src["tid"] != o["api_tid"]:
            fail(f"op api_tid mismatch {o}")
        if o["start"] < src["start"]:
            fail(f"op starts before its API call: {o['api']} seq {o['api_seq']}")
        # deterministic durations
        d = o["end"] - o["start"]
        if o["op"] == "dispatch":
            want = a.default_kernel_ns
            for cand in (o.get("kernel"), o.get("kernel_demangled")):
                if cand in kernel_ns:
                    want = kernel_ns[cand]
            if not kernel_ns and d != want:
                fail(f"kernel duration {d} != {want}: {o.get('kernel')}")
            elif kernel_ns and o.get("kernel") in kernel_ns and d != want:
                fail(f"kernel duration {d} != {want}: {o.get('kernel')}")
        elif o["op"] in ("copy", "memset"):
            want = a.copy_base_ns + o["bytes"] * 1000 // a.copy_bytes_per_us
            if d != want:
                fail(f"{o['op']} duration {d} != {want} for {o['bytes']} bytes")
            # how CLR runs it: copies between host and device on a copy engine (outside
            # graphs), the rest as blit kernels on the queue
            host = o["op"] == "copy" and o["copy_kind"] in (1, 2, 4, 5)
            want_engine = "sdma" if host and not o["is_graph"] else "blit"
            if o.get("engine") != want_engine:
                fail(f"{o['op']} (copy_kind {o['copy_kind']}, graph {o['is_graph']}) on engine {o.get('engine')}, expected {want_engine}")

    # 2. GPU intervals on one hardware queue never overlap
    per_q = collections.defaultdict(list)
    for o in ops:
        per_q[(o["pid"], o["device"], o["queue"])].append(o)
    for q, lst in per_q.items():
        lst.sort(key=lambda x: (x["start"], x["end"]))
        for p, n in zip(lst, lst[1:]):
            if n["start"] < p["end"]:
                fail(f"overlap on queue {q}: [{p['start']},{p['end']}] and [{n['start']},{n['end']}]")

    # 3. stream order: ops of one stream run in submission order, one after the other
    per_s = collections.defaultdict(list)
    for o in ops:
        per_s[(o["pid"], o["device"], o.get("stream"))].append(o)
    for s, lst in per_s.items():
        lst.sort(key=lambda x: (x["api_seq"], x.get("graph_node", 0)))
        for p, n in zip(lst, lst[1:]):
            if n["start"] < p["end"]:
                fail(f"stream order violated on {s}: seq {p['api_seq']} ends {p['end']} after seq {n['api_seq']} starts {n['start']}")

    # 3b. one replay span per graph launch: from its first node's start to its last node's end
    nodes_of = collections.defaultdict(list)
    for o in ops:
        if o["is_graph"]:
            nodes_of[(o["pid"], o["api_seq"])].append(o)
    launches = [c for c in apis if c["name"] == "hipGraphLaunch" and c.get("ret") == 0 and not c.get("captured") and c.get("nodes", 0) > 0]
    if len(replays) != len(launches):
        fail(f"{len(replays)} replay spans for {len(launches)} graph launches")
    for r in replays:
        ns = sorted(nodes_of.get((r["pid"], r["api_seq"]), []), key=lambda o: o["graph_node"])
        if len(ns) != r["nodes"]:
            fail(f"replay seq {r['api_seq']}: {r['nodes']} nodes, truth has {len(ns)} graph ops")
        elif (r["start"], r["end"]) != (ns[0]["start"], ns[-1]["end"]):
            fail(f"replay seq {r['api_seq']}: span [{r['start']},{r['end']}] is not [first start, last end] of its nodes")
        # the timing model: nothing starts before the doorbell that made it visible
        if not r.get("submit") or r["submit"] > r["start"]:
            fail(f"replay seq {r['api_seq']}: doorbell at {r.get('submit')} is not before its first node's start {r['start']}")

    # 4. synchronisation really waited
    ops_by_api = collections.defaultdict(list)
    for o in ops:
        ops_by_api[(o["pid"], o["api_seq"])].append(o)
    for c in apis:
        if c.get("ret") != 0 or c.get("lib") == "roctx":
            continue
        name = c["name"]
        key = (c["pid"], c["seq"])
        if name in ("hipMemcpy", "hipMemcpyHtoD", "hipMemcpyDtoH", "hipMemcpyDtoD", "hipMemset", "hipMemsetD8",
                    "hipMemsetD16", "hipMemsetD32", "hipMemcpy2D", "hipMemcpyPeer", "hipMemcpyWithStream") and not c.get("captured"):
            for o in ops_by_api[key]:
                if o["end"] > c["end"]:
                    fail(f"synchronous {name} returned before its GPU op finished")
        if name == "hipStreamSynchronize":
            for o in ops:
                if o["pid"] == c["pid"] and o.get("stream") == c.get("stream") and o["api_seq"] < c["seq"] \
                        and api_by[(o["pid"], o["api_seq"])]["end"] <= c["start"] and o["end"] > c["end"] \
                        and (c.get("stream") not in (0, None) or o["api_tid"] == c["tid"]):
                    fail(f"hipStreamSynchronize returned before op seq {o['api_seq']} finished")
        if name == "hipDeviceSynchronize":
            for o in ops:
                if o["pid"] == c["pid"] and o["device"] == c.get("device") and o["api_tid"] == c["tid"] \
                        and o["api_seq"] < c["seq"] and o["end"] > c["end"]:
                    fail(f"hipDeviceSynchronize returned before op seq {o['api_seq']} finished")
        if name == "hipGraphLaunch" and a.expect_graph_batch is not None and not c.get("captured"):
            n = len(ops_by_api[key])
            if n not in [int(x) for x in a.expect_graph_batch.split(",")]:
                fail(f"graph launch seq {c['seq']} has {n} ops, expected {a.expect_graph_batch}")
            if any(not o["is_graph"] for o in ops_by_api[key]):
                fail("graph op without is_graph")

    if a.expect_ops is not None and len(ops) != a.expect_ops:
        fail(f"{len(ops)} ops, expected {a.expect_ops}")

    # 5. profiler records equal the truth
    nrec = 0
    if a.profiler:
        by_time = {}
        for c in apis:
            if c.get("profiled"):
                by_time[(c["start_rt"], c["end_rt"], c["name"])] = c
        with open(a.profiler) as f:
            recs = [json.loads(l) for l in f]
        nrec = len(recs)
        matched = set()
        for r in recs:
            c = by_time.get((r["start_ns"], r["end_ns"], r["api"]))
            if not c:
                fail(f"profiler record without a truth API call: {r['api']} {r['start_ns']}")
                continue
            matched.add((c["pid"], c["seq"]))
            if r["thread_id"] != c["thread_hash"]:
                fail(f"thread_id {r['thread_id']} != truth thread_hash {c['thread_hash']} ({r['api']})")
            tops = sorted(ops_by_api[(c["pid"], c["seq"])], key=lambda o: o.get("graph_node", 0))
            gpu = r["gpu"]
            if len(gpu) != len(tops):
                fail(f"{r['api']} seq {c['seq']}: {len(gpu)} GPU activities, truth has {len(tops)} ops")
                continue
            for g, o in zip(gpu, tops):
                if g["begin_ns"] != o["start_rt"] or g["end_ns"] != o["end_rt"]:
                    fail(f"{r['api']}: GPU times differ from truth ({g['begin_ns']} vs {o['start_rt']})")
                if g["device"] != o["device"] or g["queue"] != o["queue"]:
                    fail(f"{r['api']}: device/queue differ from truth")
                if bool(g["is_graph"]) != bool(o["is_graph"]):
                    fail(f"{r['api']}: is_graph differs")
                if o["op"] == "dispatch" and (g["grid"] != o["grid"] or g["block"] != o["block"]):
                    fail(f"{r['api']}: grid/block differ")
                if o["op"] in ("copy", "memset") and g.get("bytes") != o["bytes"]:
                    fail(f"{r['api']}: bytes differ")
            if "size" in r and c.get("size") is not None and r["api"].startswith(("hipMalloc", "hipMemcpy")):
                if r["size"] != c["size"]:
                    fail(f"{r['api']}: size {r['size']} != truth {c['size']}")
        profiled = [c for c in apis if c.get("profiled")]
        if len(matched) != len(profiled):
            fail(f"{len(profiled)} profiled truth calls but {len(matched)} matched records")

    # 6. an HSA tool's signal-captured dispatch times equal the truth (HSA ticks are CLOCK_MONOTONIC ns)
    ntool = 0
    if a.hsa_tool:
        with open(a.hsa_tool) as f:
            tl = [json.loads(l) for l in f]
        summ = [t for t in tl if t["kind"] == "summary"]
        disp = [t for t in tl if t["kind"] == "dispatch"]
        ntool = len(disp)
        truth_d = {}
        for o in ops:
            # kernels, and copies / memsets the runtime ran as its blit kernels (same packets)
            if (o["op"] == "dispatch" or o.get("engine") == "blit") and (a.hsa_tool_graph or not o["is_graph"]):
                truth_d[(o["start"], o["end"])] = o
        for t in disp:
            o = truth_d.get((t["start"], t["end"]))
            if not o:
                fail(f"HSA tool dispatch {t['kernel']} [{t['start']},{t['end']}] not in truth")
            elif o.get("kernel", o.get("blit_kernel")) != t["kernel"]:
                fail(f"HSA tool kernel name {t['kernel']} != truth {o.get('kernel', o.get('blit_kernel'))}")
        if len(disp) != len(truth_d):
            fail(f"HSA tool captured {len(disp)} dispatches, truth has {len(truth_d)}")
        if not summ:
            fail("HSA tool wrote no summary")
        else:
            sm = summ[0]
            graph_launches = sum(1 for c in apis if c["name"] == "hipGraphLaunch" and c.get("ret") == 0 and not c.get("captured"))
            if graph_launches and sm["batches_gt1"] < graph_launches:
                fail(f"graph replays not submitted as batches: {sm['batches_gt1']} < {graph_launches}")
            # every op is a packet, except async copies: a marker and a fence packet each
            sdma = sum(1 for o in ops if o.get("engine") == "sdma")
            want = len(ops) - sdma + 2 * sdma
            if sm["packets"] != want:
                fail(f"HSA tool saw {sm['packets']} packets, truth ops make {want}")

    print(f"check_truth: {ntool} hsa-tool dispatches, ", end="")
    print(f"{len(apis)} api, {len(ops)} ops, {len(replays)} replay spans, {nrec} profiler records, {len(fails)} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
