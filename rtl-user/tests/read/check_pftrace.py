#!/usr/bin/env python3
"""Checks a .pftrace written by `rtl-ebpf convert --format perfetto -o X.pftrace` against its trace DB.

Usage: check_pftrace.py TRACE.pftrace TRACE.db

Parses the file with Perfetto's own protobuf definitions (pip package `perfetto`:
perfetto.protos.perfetto.trace.perfetto_trace_pb2, Trace().ParseFromString), rebuilds the slices
from the TrackEvent begin/end pairs per track, and compares with the DB:
  - every begin has its end on the same track, nothing left open;
  - the clock: one ClockSnapshot making CLOCK_MONOTONIC the trace's clock (REALTIME beside it at
    the trace's offset), every sequence defaulting to CLOCK_MONOTONIC;
  - GPU ops: same count, same (op id -> start, duration, name), on the track of their GPU / queue,
    and again on their process's stream track where the call's stream is known;
  - main threads named "COMM TID" (COMM: the executable's name, 15 bytes);
  - API calls: same count and (api id -> start, duration, name), on their process / thread;
  - roctx marker ops: same count and durations;
  - flows: every flow id leaves exactly one API slice and ends in exactly one op slice, and the
    pairs are exactly the rocpd_api_ops links to GPU ops (plus correlation-id-only pairs).
Prints a JSON summary; exits 1 with the reasons on any mismatch.
"""
import collections
import json
import sqlite3
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

CORR_FLOW_BASE = 1 << 40


def main():
    trace_path, db_path = sys.argv[1], sys.argv[2]
    trace = pb.Trace()
    with open(trace_path, "rb") as f:
        trace.ParseFromString(f.read())

    errors = []
    tracks = {}
    names = {}
    ann_names = {}
    cat_names = {}
    stacks = collections.defaultdict(list)
    slices = []  # (track_uuid, ts, dur, name, categories, annotations, flow_ids, terminating)
    for p in trace.packet:
        if p.HasField("interned_data"):
            # interning is per sequence
            seq = p.trusted_packet_sequence_id
            if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
                for d in (names, ann_names, cat_names):
                    for k in [k for k in d if k[0] == seq]:
                        del d[k]
            for n in p.interned_data.event_names:
                names[(seq, n.iid)] = n.name
            for n in p.interned_data.debug_annotation_names:
                ann_names[(seq, n.iid)] = n.name
            for n in p.interned_data.event_categories:
                cat_names[(seq, n.iid)] = n.name
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            tracks[d.uuid] = d
        if p.HasField("track_event"):
            e = p.track_event
            seq = p.trusted_packet_sequence_id
            if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
                if not p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE:
                    errors.append("an event using interned names lacks SEQ_NEEDS_INCREMENTAL_STATE")
                name = e.name if e.HasField("name") else names.get((seq, e.name_iid))
                if name is None:
                    errors.append(f"event name iid {e.name_iid} used before being interned")
                anns = {}
                for a in e.debug_annotations:
                    k = a.name if a.HasField("name") else ann_names.get((seq, a.name_iid))
                    if not k:
                        errors.append(f"an argument of {name!r} has no name")
                    if a.HasField("int_value"):
                        anns[k] = a.int_value
                    elif a.HasField("pointer_value"):
                        anns[k] = a.pointer_value
                    else:
                        anns[k] = a.string_value
                cats = list(e.categories) + [cat_names.get((seq, i), f"?{i}") for i in e.category_iids]
                stacks[e.track_uuid].append((p.timestamp, name, cats, anns, list(e.flow_ids), list(e.terminating_flow_ids)))
            elif e.type == pb.TrackEvent.TYPE_SLICE_END:
                if not stacks[e.track_uuid]:
                    errors.append(f"end without begin on track {e.track_uuid} at {p.timestamp}")
                    continue
                ts, name, cats, anns, fo, fi = stacks[e.track_uuid].pop()
                if p.timestamp < ts:
                    errors.append(f"slice {name} ends before it begins ({ts} -> {p.timestamp})")
                slices.append((e.track_uuid, ts, p.timestamp - ts, name, cats, anns, fo, fi))
    for u, st in stacks.items():
        if st:
            errors.append(f"{len(st)} slices never ended on track {u}")
    for s in slices:
        if s[0] not in tracks:
            errors.append(f"slice {s[3]} on undeclared track {s[0]}")
            break

    def track_path(uuid):
        out = []
        while uuid in tracks:
            d = tracks[uuid]
            out.append(d)
            uuid = d.parent_uuid if d.HasField("parent_uuid") else None
        return out

    db = sqlite3.connect(db_path)
    q = lambda sql: db.execute(sql).fetchall()

    def db_meta(tag):
        r = q(f"SELECT value FROM rocpd_metadata WHERE tag = '{tag}' ORDER BY id DESC LIMIT 1")
        return r[0][0] if r else None
    string = dict(q("SELECT id, string FROM rocpd_string"))

    # The clock: CLOCK_MONOTONIC (BuiltinClock 3) is the trace's clock, and every sequence's default.
    snaps = [p.clock_snapshot for p in trace.packet if p.HasField("clock_snapshot")]
    if len(snaps) != 1 or snaps[0].primary_trace_clock != 3:
        errors.append(f"expected one ClockSnapshot with primary_trace_clock MONOTONIC, got {snaps}")
    else:
        clocks = {c.clock_id: c.timestamp for c in snaps[0].clocks}
        if 3 not in clocks:
            errors.append("the ClockSnapshot lacks CLOCK_MONOTONIC")
        rmm = db_meta("realtime_minus_monotonic_ns")
        if rmm is not None and clocks.get(1, 0) - clocks.get(3, 0) != int(rmm):
            errors.append(f"REALTIME - MONOTONIC in the snapshot is {clocks.get(1, 0) - clocks.get(3, 0)}, the trace says {rmm}")
    for p in trace.packet:
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            if p.trace_packet_defaults.timestamp_clock_id != 3:
                errors.append(f"sequence {p.trusted_packet_sequence_id} does not default to CLOCK_MONOTONIC")

    # GPU ops: once on their queue's track, and again on their stream's where the stream is known.
    gpu_all = [s for s in slices if "gpu" in s[4]]
    on_stream = lambda s: [d.name for d in track_path(s[0])][0].split(" (")[0].endswith("stream") or \
        [d.name for d in track_path(s[0])][0].startswith("stream ")
    gpu = [s for s in gpu_all if not on_stream(s)]
    streams = [s for s in gpu_all if on_stream(s)]
    want_streams = {r[0]: r for r in q("""SELECT o.id, o.gpuId, r.a3, a.pid FROM rocpd_op o
        JOIN rocpd_api a ON a.id = (SELECT l.api_id FROM rocpd_api_ops l WHERE l.op_id = o.id LIMIT 1)
        JOIN rtl_api r ON r.api_id = a.id JOIN rtl_api_meaning m ON m.apiName_id = a.apiName_id AND m.a3 = 'stream'
        WHERE o.gpuId >= 0 AND r.a3 IS NOT NULL""")}
    if sorted(s[5].get("op_id") for s in streams) != sorted(want_streams):
        errors.append(f"stream slices: {len(streams)}, ops with a known stream: {len(want_streams)}")
    for s in streams:
        r = want_streams.get(s[5].get("op_id"))
        if r is None:
            continue
        _, g, stream, pid = r
        path = [d.name for d in track_path(s[0])]
        label = "null stream" if stream == 0 else f"stream {stream:#x}"
        if not path[0].startswith(f"{label} (pid {pid})") or f"GPU {g}" not in path:
            errors.append(f"op {r[0]} (GPU {g}, {label}, pid {pid}) is on stream track {path}")

    # Threads: the main thread named by its command (comm), as Perfetto names threads.
    for pid, exe in q("SELECT pid, exe FROM rtl_process WHERE exe IS NOT NULL AND exe != ''"):
        comm = exe.rsplit("/", 1)[-1].encode()[:15].decode(errors="ignore")
        mains = [d for d in tracks.values() if d.HasField("thread") and d.thread.pid == pid and d.thread.tid == pid]
        if mains and mains[0].thread.thread_name != f"{comm} {pid}":
            errors.append(f"main thread of {pid} named {mains[0].thread.thread_name!r}, not {comm} {pid}")

    # GPU ops on their queue.
    ops = {r[0]: r for r in q("SELECT id, gpuId, queueId, start, end, description_id, opType_id FROM rocpd_op WHERE gpuId >= 0")}
    if len(gpu) != len(ops):
        errors.append(f"GPU op slices: {len(gpu)} in the trace, {len(ops)} in the DB")
    seen = set()
    for s in gpu:
        oid = s[5].get("op_id")
        r = ops.get(oid)
        if r is None:
            errors.append(f"op slice with unknown op_id {oid}")
            continue
        seen.add(oid)
        _, g, qid, start, end, desc, ty = r
        want_name = string.get(desc) or string.get(ty)
        if (s[1], s[2], s[3]) != (start, end - start, want_name):
            errors.append(f"op {oid}: trace has ts={s[1]} dur={s[2]} name={s[3]!r}, DB start={start} dur={end - start} name={want_name!r}")
        path = [d.name for d in track_path(s[0])]
        if not path or not path[0].startswith(f"queue {qid}") or f"GPU {g}" not in path:
            errors.append(f"op {oid} (GPU {g} queue {qid}) is on track {path}")
    if len(seen) != len(ops):
        errors.append(f"{len(ops) - len(seen)} DB ops missing from the trace")

    # API calls.
    api = [s for s in slices if "api" in s[4]]
    apis = {r[0]: r for r in q("SELECT id, pid, tid, start, end, apiName_id FROM rocpd_api")}
    if len(api) != len(apis):
        errors.append(f"API slices: {len(api)} in the trace, {len(apis)} in the DB")
    for s in api:
        aid = s[5].get("api_id")
        r = apis.get(aid)
        if r is None:
            errors.append(f"API slice with unknown api_id {aid}")
            continue
        _, pid, tid, start, end, n = r
        if (s[1], s[2], s[3]) != (start, max(end, start) - start, string.get(n)):
            errors.append(f"api {aid}: trace ts={s[1]} dur={s[2]} name={s[3]!r}, DB start={start} dur={end - start} name={string.get(n)!r}")
        path = track_path(s[0])
        thread = next((d.thread for d in path if d.HasField("thread")), None)
        procs = [d.process.pid for d in track_path(s[0]) if d.HasField("process")]
        if thread is not None:
            if (thread.pid, thread.tid) != (pid, tid):
                errors.append(f"api {aid} of {pid}/{tid} on thread {thread.pid}/{thread.tid}")
        elif not procs:
            # overlap lane: a named child of the process track
            parent = tracks.get(path[0].parent_uuid) if path else None
            if parent is None or not parent.HasField("process") or parent.process.pid != pid:
                errors.append(f"api {aid} of pid {pid} not under its process")

    # roctx ranges.
    rx = [s for s in slices if "roctx" in s[4]]
    markers = q("SELECT end - start FROM rocpd_op WHERE gpuId < 0")
    if markers:
        if sorted(s[2] for s in rx) != sorted(max(m[0], 0) for m in markers):
            errors.append(f"roctx slices {sorted(s[2] for s in rx)} != marker ops {sorted(m[0] for m in markers)}")
    else:
        # no marker ops: ranges paired from roctxRangePush / roctxMark API rows
        (n,) = q("SELECT count(*) FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id "
                 "WHERE s.string GLOB 'roctxRangePush*' OR s.string GLOB 'roctxMark*' OR s.string = 'UserMarker'")[0]
        if len(rx) != n:
            errors.append(f"{len(rx)} roctx slices, {n} roctx push/mark calls")

    # Flows.
    out_f = collections.Counter(f for s in api for f in s[6])
    in_f = collections.Counter(f for s in gpu for f in s[7])
    want = {}
    for lid, a, o in q("SELECT l.id, l.api_id, l.op_id FROM rocpd_api_ops l JOIN rocpd_op o ON o.id = l.op_id WHERE o.gpuId >= 0"):
        want[lid] = (a, o)
    for oid, a in q("""SELECT o.id, (SELECT min(a.id) FROM rocpd_api a WHERE a.correlation_id = o.correlation_id) FROM rocpd_op o
                       WHERE o.gpuId >= 0 AND o.correlation_id != 0
                         AND NOT EXISTS (SELECT 1 FROM rocpd_api_ops l WHERE l.op_id = o.id)
                         AND EXISTS (SELECT 1 FROM rocpd_api a WHERE a.correlation_id = o.correlation_id)"""):
        want[CORR_FLOW_BASE + oid] = (a, oid)
    got = {}
    for s in api:
        for f in s[6]:
            got.setdefault(f, [None, None])[0] = s[5].get("api_id")
    for s in gpu:
        for f in s[7]:
            got.setdefault(f, [None, None])[1] = s[5].get("op_id")
    if any(c != 1 for c in out_f.values()) or any(c != 1 for c in in_f.values()):
        errors.append("a flow id is used by more than one slice")
    got = {k: tuple(v) for k, v in got.items()}
    if got != want:
        missing = {k: v for k, v in want.items() if got.get(k) != v}
        extra = {k: v for k, v in got.items() if want.get(k) != v}
        errors.append(f"flows differ: expected-but-wrong {dict(list(missing.items())[:5])}, unexpected {dict(list(extra.items())[:5])}")

    report = {
        "packets": len(trace.packet), "tracks": len(tracks), "slices": len(slices),
        "gpu_ops": len(gpu), "gpu_ops_on_streams": len(streams), "api_calls": len(api), "roctx": len(rx), "flows": len(got),
        "errors": errors[:20],
    }
    print(json.dumps(report))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
