"""PyTorch launch sites with known Python callers (issue 17), for tests/gpu/torch_sites.sh.

  python torch_sites.py --truth FILE [--reps N] [--replays R]

Every function below issues exactly one CUDA kernel per call, of a kind no other function
issues (an in-place unary op: its kernel's name holds the op's `*_kernel_cuda`), so the
function that issued each kernel is known from the kernel's name:
  eager, main thread: e_sin, Model.e_cos (a method), e_neg (a closure), e_exp via a 12-deep
                      recursion (its site is the innermost `e_exp`), e_floor via a generator;
  eager, a second thread: t_ceil, t_trunc (on its own tensor and stream);
  a CUDA graph captured in `capture()` from g_tanh, g_sigmoid, g_reciprocal, g_atan (in that
  order, 3 rounds: 12 nodes), then replayed R times from `replay()`.
The truth file (JSON) maps each kernel key to its function and the line of its op, gives the
counts issued eagerly, the capture's node order (function names), the replay count, and the
CLOCK_MONOTONIC bounds of the work (setup kernels outside it are not counted).
"""
import argparse, json, sys, threading, time
import torch

p = argparse.ArgumentParser()
p.add_argument("--truth", required=True)
p.add_argument("--reps", type=int, default=100)
p.add_argument("--replays", type=int, default=50)
a = p.parse_args()

dev = torch.device("cuda")
x = torch.rand(1 << 16, device=dev) + 0.5
y = torch.rand(1 << 16, device=dev) + 0.5
z = torch.rand(1 << 16, device=dev) + 0.5
torch.cuda.synchronize()
LINES = {}


def here(key):
    """Records the caller's line for `key` (called on the op's own line)."""
    f = sys._getframe(1)
    LINES[key] = (getattr(f.f_code, "co_qualname", f.f_code.co_name), f.f_lineno)


def e_sin():
    here("sin_kernel_cuda"); x.sin_()


class Model:
    def e_cos(self):
        here("cos_kernel_cuda"); x.cos_()


def make_closure():
    def e_neg():
        here("neg_kernel_cuda"); x.neg_()
    return e_neg


def e_exp(depth):
    if depth > 0:
        return e_exp(depth - 1)
    here("exp_kernel_cuda"); x.exp_()


def e_floor_gen(n):
    for _ in range(n):
        here("floor_kernel_cuda"); x.floor_()
        yield


def t_ceil():
    here("ceil_kernel_cuda"); z.ceil_()


def t_trunc():
    here("trunc_kernel_cuda"); z.trunc_()


def g_tanh():
    here("tanh_kernel_cuda"); y.tanh_()


def g_sigmoid():
    here("sigmoid_kernel_cuda"); y.sigmoid_()


def g_reciprocal():
    here("reciprocal_kernel_cuda"); y.reciprocal_()


def g_atan():
    here("atan_kernel_cuda"); y.atan_()


def capture():
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    order = []
    with torch.cuda.stream(s):  # warm-up outside the capture, as PyTorch asks
        g_tanh(); g_sigmoid(); g_reciprocal(); g_atan()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        for _ in range(3):
            for fn in (g_tanh, g_sigmoid, g_reciprocal, g_atan):
                fn()
                order.append(fn.__name__)
    torch.cuda.synchronize()
    return g, order


def replay(g, r):
    for _ in range(r):
        g.replay()


def worker(n):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(n):
            t_ceil()
            t_trunc()
    s.synchronize()


m, neg = Model(), make_closure()
# Setup outside the counted window (kernels of tensors' creation, the warm-ups above).
g, order = capture()
t0 = time.monotonic_ns()
th = threading.Thread(target=worker, args=(a.reps,), name="sites-worker")
th.start()
gen = e_floor_gen(a.reps)
for _ in range(a.reps):
    e_sin()
    m.e_cos()
    neg()
    e_exp(12)
    next(gen)
th.join()
replay(g, a.replays)
torch.cuda.synchronize()
t1 = time.monotonic_ns()
eager = {k: a.reps for k in ("sin_kernel_cuda", "cos_kernel_cuda", "neg_kernel_cuda", "exp_kernel_cuda",
                             "floor_kernel_cuda", "ceil_kernel_cuda", "trunc_kernel_cuda")}
truth = {"t0": t0, "t1": t1, "lines": LINES, "eager": eager, "capture_order": order, "replays": a.replays,
         "replay_site": "replay"}
with open(a.truth, "w") as f:
    json.dump(truth, f)
print(json.dumps({"eager_kernels": sum(eager.values()), "graph_nodes": len(order), "replays": a.replays}))
