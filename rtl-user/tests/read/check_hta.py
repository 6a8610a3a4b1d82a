"""Loads Kineto-conventional traces (a file's directory) with Holistic Trace Analysis and prints,
as one JSON line, what its analyses say: per rank the temporal breakdown (kernel span, idle,
busy = span - idle, in ns), the GPU kernel breakdown (per kernel name: calls and total ns, memory
kernels included, nothing grouped into "others"), and the idle-time breakdown (streams seen).

Usage: check_hta.py TRACE_DIR
HTA rounds ns-resolution timestamps to whole microseconds unless HTA_DISABLE_NS_ROUNDING=1;
the caller sets it so that the comparison is of our conversion, not of that rounding."""

import json
import logging
import sys

logging.disable(logging.WARNING)

from hta.trace_analysis import TraceAnalysis  # noqa: E402


def main(trace_dir):
    ta = TraceAnalysis(trace_dir=trace_dir)
    out = {"ranks": sorted(int(r) for r in ta.t.traces.keys())}
    temporal = ta.get_temporal_breakdown(visualize=False)
    out["temporal"] = [
        {
            "rank": int(r["rank"]),
            "kernel_time_ns": float(r["kernel_time(us)"]) * 1000.0,
            "idle_time_ns": float(r["idle_time(us)"]) * 1000.0,
            "compute_time_ns": float(r["compute_time(us)"]) * 1000.0,
        }
        for _, r in temporal.iterrows()
    ]
    _, kernels = ta.get_gpu_kernel_breakdown(
        visualize=False, num_kernels=1_000_000, duration_ratio=1.0, include_memory_kernels=True
    )
    out["kernels"] = [
        {"rank": int(r["rank"]), "name": r["name"], "type": r["kernel_type"], "sum_ns": float(r["sum (us)"]) * 1000.0}
        for _, r in kernels.iterrows()
    ]
    # Calls per name straight from the loaded events (the breakdown gives sums, not counts).
    sym = ta.t.symbol_table.get_sym_table()
    calls = {}
    for rank, df in ta.t.traces.items():
        gpu = df[df["stream"].ne(-1)]
        for n, c in gpu["name"].value_counts().items():
            calls[f"{int(rank)}/{sym[n]}"] = int(c)
    out["calls"] = calls
    idle = []
    for rank in out["ranks"]:
        df, _ = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)
        idle += [
            {"rank": int(r["rank"]), "stream": int(r["stream"]), "category": r["idle_category"], "idle_ns": float(r["idle_time"]) * 1000.0}
            for _, r in df.iterrows()
        ]
    out["idle"] = idle
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
