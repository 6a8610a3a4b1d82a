#!/usr/bin/env python3
"""Python call sites (issue 17): HIP calls through ctypes from known Python functions.

Each HIP call is made on a line that also notes, from the interpreter itself, the function
(`co_qualname`, or `co_name` on 3.10) and line of that call: the ground truth, written to --truth as lines
"API<TAB>FUNCTION<TAB>LINE<TAB>CALLS". The calls come from a module-level function, a method,
a closure, a recursion 12 deep, one
46 deep with large frames, a generator, and a second thread (ctypes releases the GIL
around each foreign call, so the tracer must find the calling thread's own state).

Usage: python_sites.py --reps N --truth PATH  (libamdhip64.so found through LD_LIBRARY_PATH)
"""

import argparse
import collections
import ctypes
import sys
import threading
import time

TRUTH = collections.Counter()

def note(api):
    caller = sys._getframe(1)
    code = caller.f_code
    # 3.10's code objects have only `co_name` (`co_qualname` is 3.11+): the name the tracer gives.
    TRUTH[(api, getattr(code, "co_qualname", code.co_name), caller.f_lineno)] += 1

class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]

def load():
    for name in ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    sys.exit("python_sites: libamdhip64 not found (set LD_LIBRARY_PATH)")

hip = load()
hip.__hipRegisterFatBinary.restype = ctypes.POINTER(ctypes.c_void_p)
hip.__hipRegisterFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
hip.__hipRegisterFunction.argtypes += [ctypes.c_uint] + [ctypes.c_void_p] * 5
hip.hipLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
hip.hipMemsetAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
hip.hipMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
STUBS = [ctypes.create_string_buffer(16) for _ in range(3)]
MODULE = hip.__hipRegisterFatBinary(None)
for i, stub in enumerate(STUBS):
    name = f"py_kernel_{i}".encode()
    hip.__hipRegisterFunction(MODULE, ctypes.addressof(stub), name, name, 0, None, None, None, None, None)
GRID, BLOCK = Dim3(1, 1, 1), Dim3(64, 1, 1)

def check(err):
    if err != 0:
        sys.exit(f"python_sites: HIP error {err}")

def plain(dev):
    check(hip.hipLaunchKernel(ctypes.addressof(STUBS[0]), GRID, BLOCK, None, 0, None)); note("hipLaunchKernel")
    check(hip.hipMemsetAsync(dev, 0, 256, None)); note("hipMemsetAsync")

class Model:
    def forward(self, dev, host):
        check(hip.hipMemcpyAsync(dev, host, 256, 1, None)); note("hipMemcpyAsync")
        check(hip.hipLaunchKernel(ctypes.addressof(STUBS[1]), GRID, BLOCK, None, 0, None)); note("hipLaunchKernel")

def outer(dev):
    def inner():
        check(hip.hipMemsetAsync(dev, 1, 128, None)); note("hipMemsetAsync")

    inner()

def recurse(depth):
    if depth == 0:
        check(hip.hipLaunchKernel(ctypes.addressof(STUBS[2]), GRID, BLOCK, None, 0, None)); note("hipLaunchKernel")
        return
    recurse(depth - 1)

def deep(depth):
    # Large frames (40 locals each), DEEP of them: on 3.11+ the chain spans several pages and
    # more than the thread's first 16 KiB data-stack chunk.
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = a10 = a11 = a12 = a13 = a14 = a15 = a16 = a17 = a18 = a19 = depth
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = b8 = b9 = b10 = b11 = b12 = b13 = b14 = b15 = b16 = b17 = b18 = b19 = a0
    if depth == 0:
        check(hip.hipLaunchKernel(ctypes.addressof(STUBS[1]), GRID, BLOCK, None, 0, None)); note("hipLaunchKernel")
        return b19
    return deep(depth - 1)

DEEP = 45

def generator(n):
    for _ in range(n):
        check(hip.hipLaunchKernel(ctypes.addressof(STUBS[0]), GRID, BLOCK, None, 0, None)); note("hipLaunchKernel")
        yield

def worker(dev, reps):
    for _ in range(reps):
        check(hip.hipMemsetAsync(dev, 2, 64, None)); note("hipMemsetAsync")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--truth", required=True)
    # The collector names Python frames from the probe's copies of their code objects, made at
    # the calls, so the process need not outlive them; --linger keeps it alive anyway (the live
    # process fills in what a copy lacks: a line past a cut line table, a long name).
    ap.add_argument("--linger", type=float, default=0.0, help="seconds to stay alive after the last call")
    a = ap.parse_args()
    dev = ctypes.c_void_p()
    check(hip.hipMalloc(ctypes.byref(dev), 4096))
    host = ctypes.create_string_buffer(4096)
    model = Model()
    for _ in range(a.reps):
        plain(dev)
        model.forward(dev, host)
        outer(dev)
        recurse(12)
        deep(DEEP)
    for _ in generator(a.reps):
        pass
    t = threading.Thread(target=worker, args=(dev, a.reps))
    t.start()
    t.join()
    check(hip.hipDeviceSynchronize())
    with open(a.truth, "w") as f:
        for (api, fn, line), n in sorted(TRUTH.items()):
            f.write(f"{api}\t{fn}\t{line}\t{n}\n")
    if a.linger > 0:
        time.sleep(a.linger)

if __name__ == "__main__":
    main()
