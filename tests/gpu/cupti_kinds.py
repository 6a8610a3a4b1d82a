"""What each part of CUPTI activity tracing costs a CUDA graph replay (issue 14), on the H200.

  python cupti_kinds.py KINDS [--replays R] [--blocks B] [--kernels K]

KINDS, comma-separated (or `none`): which CUPTI activity parts to enable before CUDA starts,
as the agent does, without the agent or the collector:
  graph     CUPTI_ACTIVITY_KIND_GRAPH_TRACE (one record per graph launch)
  kernel    CONCURRENT_KERNEL            memcpy / memset   MEMCPY / MEMSET
  api-gpu   DRIVER and RUNTIME API records for the launch/copy/memset calls only (by callback id)
  api-all   DRIVER and RUNTIME API records for every call
  cb-launch a callback subscription on cuGraphLaunch only (cuptiSubscribe + cuptiEnableCallback),
            an alternative way to learn the correlation of a graph launch
  events    no CUPTI: a timing event recorded on the stream before and after every replay
            (cudaEventRecord through ctypes; the launch's own span)
  events-end no CUPTI: one timing event after every replay only (what a span costs when its
            start is taken from the previous replay's end while the stream is busy)
  inst-off  modifier: the activity kinds above are switched off while the graph is captured and
            instantiated and on again before the replays (does CUPTI instrument a graph when it
            is instantiated, or at each launch?)
  late      modifier: the activity kinds are enabled only after the graph is instantiated
  toggle    modifier: the activity kinds are switched off before every replay and on after it
  hwtrace   modifier: cuptiActivityEnableHWTrace(1) before the kinds are enabled (CUDA 12.6+;
            the JSON says what it returned)
Prints one JSON line: the median us per replay of a K-kernel graph over B timed blocks, and the
records CUPTI delivered by kind. This is a measuring tool for choosing the agent's defaults; the
agent's own cost is measured by graph_cost.sh.
"""
import argparse, ctypes, glob, json, os, statistics, sys, time

p = argparse.ArgumentParser()
p.add_argument("kinds")
p.add_argument("--replays", type=int, default=2000)
p.add_argument("--blocks", type=int, default=10)
p.add_argument("--kernels", type=int, default=50)
a = p.parse_args()
kinds = [] if a.kinds == "none" else a.kinds.split(",")
use_events = "events" in kinds or "events-end" in kinds
end_only = "events-end" in kinds
inst_off = "inst-off" in kinds
late = "late" in kinds
toggle = "toggle" in kinds
hwtrace = "hwtrace" in kinds
kinds = [k for k in kinds if k not in ("events", "events-end", "inst-off", "late", "toggle", "hwtrace")]

KIND = {"memcpy": 1, "memset": 2, "kernel": 10, "graph": 51}
counts = {}
keep = []
cupti = None
if kinds:
    import nvidia  # the pip wheels: libcupti next to libcudart
    cands = []
    for base in nvidia.__path__:
        cands += glob.glob(os.path.join(base, "**", "libcupti.so*"), recursive=True)
    if not cands:
        sys.exit("no libcupti in the nvidia wheels")
    cupti = ctypes.CDLL(sorted(cands)[0])
    REQ = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t))
    DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
    SIZE = 8 << 20
    bufs = {}

    def req(buf, size, maxrec):
        b = ctypes.create_string_buffer(SIZE + 8)
        addr = (ctypes.addressof(b) + 7) & ~7
        bufs[addr] = b
        buf[0] = addr
        size[0] = SIZE
        maxrec[0] = 0

    def done(ctx, stream, buf, size, valid):
        rec = ctypes.c_void_p(0)
        while cupti.cuptiActivityGetNextRecord(ctypes.c_void_p(buf), ctypes.c_size_t(valid), ctypes.byref(rec)) == 0:
            k = ctypes.c_uint32.from_address(rec.value).value
            counts[k] = counts.get(k, 0) + 1
        bufs.pop(buf, None)

    r, d = REQ(req), DONE(done)
    keep += [r, d]

    def check(rc, what):
        if rc != 0:
            sys.exit(f"{what}: CUptiResult {rc}")

    check(cupti.cuptiActivityRegisterCallbacks(r, d), "cuptiActivityRegisterCallbacks")

    def set_kinds(on):
        for k in kinds:
            if k in KIND:
                fn = cupti.cuptiActivityEnable if on else cupti.cuptiActivityDisable
                check(fn(KIND[k]), f"cuptiActivity{'Enable' if on else 'Disable'}({k})")

    if hwtrace:
        counts["hwtrace_rc"] = cupti.cuptiActivityEnableHWTrace(1)
    for k in kinds:
        if k in KIND:
            if not late:
                check(cupti.cuptiActivityEnable(KIND[k]), f"cuptiActivityEnable({k})")
        elif k == "api-all":
            check(cupti.cuptiActivityEnable(4), "enable DRIVER")
            check(cupti.cuptiActivityEnable(5), "enable RUNTIME")
        elif k == "api-gpu":
            fams = [b"cuLaunch", b"cuGraphLaunch", b"cuMemcpy", b"cuMemset", b"cudaLaunch", b"cudaGraphLaunch", b"cudaMemcpy", b"cudaMemset"]
            n = 0
            for dom, en in [(1, cupti.cuptiActivityEnableDriverApi), (2, cupti.cuptiActivityEnableRuntimeApi)]:
                miss = 0
                for cbid in range(1, 8192):
                    s = ctypes.c_char_p()
                    if cupti.cuptiGetCallbackName(dom, cbid, ctypes.byref(s)) != 0 or not s.value:
                        miss += 1
                        if miss >= 256:
                            break
                        continue
                    miss = 0
                    if any(s.value.startswith(f) for f in fams):
                        check(en(cbid, 1), f"enable api {s.value}")
                        n += 1
            if n == 0:
                sys.exit("no gpu-work API found")
        elif k == "cb-launch":
            CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p)
            seen = [0]

            def cb(ud, dom, cbid, info):
                seen[0] += 1

            c = CB(cb)
            keep.append(c)
            sub = ctypes.c_void_p()
            check(cupti.cuptiSubscribe(ctypes.byref(sub), c, None), "cuptiSubscribe")
            found = 0
            for cbid in range(1, 8192):
                s = ctypes.c_char_p()
                if cupti.cuptiGetCallbackName(1, cbid, ctypes.byref(s)) == 0 and s.value and s.value.startswith(b"cuGraphLaunch"):
                    check(cupti.cuptiEnableCallback(1, sub, 1, cbid), "cuptiEnableCallback")
                    found += 1
            counts["callbacks_enabled"] = found
            counts["callback_calls"] = seen
        else:
            sys.exit(f"unknown kind {k}")

import torch

dev = torch.device("cuda")
x = torch.zeros(1024, device=dev)
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        x.add_(1.0)
torch.cuda.current_stream().wait_stream(s)
torch.cuda.synchronize()
if cupti is not None and inst_off:
    set_kinds(False)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    for _ in range(a.kernels):
        x.add_(1.0)
if cupti is not None and (inst_off or late):
    set_kinds(True)
g.replay()
torch.cuda.synchronize()
big = torch.randn(4096, 4096, device=dev)
tw = time.monotonic()
while time.monotonic() - tw < 1.0:
    big @ big
    torch.cuda.synchronize()
per = a.replays // a.blocks
times = []
spans = []
if use_events:
    cudart = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "**", "libcudart.so*"), recursive=True)[0])
    evs = []
    for _ in range(2 * per):
        e = ctypes.c_void_p()
        assert cudart.cudaEventCreate(ctypes.byref(e)) == 0
        evs.append(e)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
for _ in range(a.blocks):
    b0 = time.perf_counter()
    if use_events:
        rec = cudart.cudaEventRecord
        for i in range(per):
            if not end_only:
                rec(evs[2 * i], stream)
            if toggle:
                set_kinds(False)
            g.replay()
            if toggle:
                set_kinds(True)
            rec(evs[2 * i + 1], stream)
    elif toggle:
        for _ in range(per):
            set_kinds(False)
            g.replay()
            set_kinds(True)
    else:
        for _ in range(per):
            g.replay()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - b0) / per * 1e6)
    if use_events:
        ms = ctypes.c_float()
        for i in range(per):
            a0, a1 = (evs[2 * i - 1], evs[2 * i + 1]) if end_only else (evs[2 * i], evs[2 * i + 1])
            if end_only and i == 0:
                continue
            assert cudart.cudaEventElapsedTime(ctypes.byref(ms), a0, a1) == 0
            spans.append(ms.value * 1000)
if cupti is not None:
    x.add_(1.0)  # one eager kernel after the switch: are eager kernels still recorded?
    torch.cuda.synchronize()
    cupti.cuptiActivityFlushAll(1)
out = {"kinds": a.kinds, "us_per_replay": statistics.median(times), "blocks": [round(t, 2) for t in times]}
if spans:
    out["event_span_us_median"] = statistics.median(spans)
out["records"] = {str(k): (v[0] if isinstance(v, list) else v) for k, v in counts.items()}
print(json.dumps(out), flush=True)
