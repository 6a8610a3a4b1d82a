"""GPU workloads for tests/gpu/run.sh: PyTorch on CUDA, timed, optionally under torch.profiler.

  app.py eager N        N tiny add_ kernels (launch-bound), in BLOCKS timed blocks
  app.py graph R        a CUDA graph of K (default 50) add_ kernels, replayed R times
  app.py transformer I  I forward passes of a small transformer encoder (eval, no grad)
  app.py mix I          I rounds of: 20 eager kernels, 3 replays of a 5-kernel graph, one copy
                        each way, one cudaMemset (the CUPTI fixtures: every GPU op kind)

Options: --profile (torch.profiler with CPU + CUDA activities around the measured region; its
kernel count is reported), --wait FILE (initialise CUDA, then wait for FILE before the measured
region: for `attach --pid`), --out FILE (append the JSON result line there).
The result (one JSON line on stdout) has the measured region's CLOCK_MONOTONIC bounds, the pid
and tid, timings per unit (medians over blocks) and the kernels the app launched there.
"""
import argparse, json, os, statistics, sys, threading, time
import torch

p = argparse.ArgumentParser()
p.add_argument("mode", choices=["eager", "graph", "transformer", "mix"])
p.add_argument("n", type=int)
p.add_argument("--blocks", type=int, default=5)
p.add_argument("--kernels", type=int, default=50, help="kernels per graph")
p.add_argument("--profile", action="store_true")
p.add_argument("--profile-stack", action="store_true", help="--profile with with_stack=True (Python and native call sites)")
p.add_argument("--profile-early", action="store_true",
               help="start torch.profiler before CUDA is first used (as the agent's CUPTI starts): its "
                    "per-name totals then include the warm-up kernels; compare mean durations")
p.add_argument("--wait")
p.add_argument("--warm", type=float, default=0.0, help="seconds of large matmuls before the measured region (GPU clocks up)")
p.add_argument("--out")
p.add_argument("--meta", default="{}", help="JSON object merged into the result line")
a = p.parse_args()

prof = None
if a.profile_early:
    from torch.profiler import profile, ProfilerActivity
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    prof.__enter__()
dev = torch.device("cuda")
x = torch.zeros(1024, device=dev)
torch.cuda.synchronize()
res = {"mode": a.mode, "n": a.n, "pid": os.getpid(), "tid": threading.get_native_id(), "profile": a.profile}
res.update(json.loads(a.meta))

if a.mode == "eager":
    def work(k):
        for _ in range(k):
            x.add_(1.0)
    work(200)  # warm-up: lazy module loading, caching allocator
    unit, per_block = "launch", a.n // a.blocks
    expect = per_block * a.blocks
elif a.mode == "graph":
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            x.add_(1.0)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(a.kernels):
            x.add_(1.0)
    g.replay()
    torch.cuda.synchronize()
    def work(k):
        for _ in range(k):
            g.replay()
    unit, per_block = "replay", a.n // a.blocks
    expect = per_block * a.blocks * a.kernels
    res["graph_kernels"] = a.kernels
elif a.mode == "mix":
    import ctypes
    cudart = ctypes.CDLL("libcudart.so.13")
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        x.add_(1.0)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for _ in range(5):
            x.add_(1.0)
    host = torch.ones(1024)
    def work(k):
        for _ in range(k):
            for _ in range(20):
                x.add_(1.0)
            for _ in range(3):
                g.replay()
            x.copy_(host)
            host.copy_(x)
            rc = cudart.cudaMemset(ctypes.c_void_p(x.data_ptr()), 0, ctypes.c_size_t(4096))
            assert rc == 0, f"cudaMemset: {rc}"
    work(1)
    unit, per_block = "round", a.n // a.blocks
    expect = per_block * a.blocks * (20 + 15)
else:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).to(dev).eval()
    inp = torch.randn(8, 128, 256, device=dev)
    def work(k):
        with torch.no_grad():
            for _ in range(k):
                model(inp)
    work(3)
    unit, per_block = "forward", a.n // a.blocks
    expect = None  # counted by the profiler and the tracer

torch.cuda.synchronize()
if a.warm > 0:
    big = torch.randn(4096, 4096, device=dev)
    tw = time.monotonic()
    while time.monotonic() - tw < a.warm:
        big @ big
        torch.cuda.synchronize()
    del big
if a.wait:
    print(json.dumps({"ready": os.getpid()}), flush=True)
    while not os.path.exists(a.wait):
        time.sleep(0.01)

if a.profile_stack:
    a.profile = True
if a.profile and prof is None:
    from torch.profiler import profile, ProfilerActivity
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=a.profile_stack)
    prof.__enter__()
ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
times = []
t0 = time.monotonic_ns()
ev0.record()
for _ in range(a.blocks):
    b0 = time.perf_counter()
    work(per_block)
    torch.cuda.synchronize()
    times.append((time.perf_counter() - b0) / per_block * 1e6)
ev1.record()
torch.cuda.synchronize()
t1 = time.monotonic_ns()
if prof is not None:
    prof.__exit__(None, None, None)
    kernels = memcpy = memset = 0
    kdur = 0.0
    per_name = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            n = e.name
            if n.startswith("Memcpy"):
                memcpy += 1
            elif n.startswith("Memset"):
                memset += 1
            else:
                kernels += 1
                d = e.time_range.elapsed_us()
                kdur += d
                c = per_name.setdefault(n, [0, 0.0])
                c[0] += 1
                c[1] += d
    res.update(profiler_kernels=kernels, profiler_memcpy=memcpy, profiler_memset=memset, profiler_kernel_us=kdur,
               profiler_per_name=per_name)
res.update(t0=t0, t1=t1, unit=unit, per_unit_us=statistics.median(times), blocks_us=times,
           gpu_us_per_unit=ev0.elapsed_time(ev1) * 1e3 / (per_block * a.blocks), expect_kernels=expect)
line = json.dumps(res)
print(line, flush=True)
if a.out:
    with open(a.out, "a") as f:
        f.write(line + "\n")
