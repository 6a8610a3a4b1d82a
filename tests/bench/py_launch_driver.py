"""The python-stack-cost benchmark's driver: calls the bench target's `hipLaunchKernel`
through ctypes from DEPTH nested Python functions, CALLS times, and prints the time per call.

Usage: py_launch_driver.py LIB CALLS DEPTH [HOLD_SECONDS]  (HOLD: stay alive that long after
printing, so the tracer's in-kernel program statistics can be read while it still runs)
"""

import ctypes
import json
import sys
import time

lib = ctypes.CDLL(sys.argv[1])
calls, depth = int(sys.argv[2]), int(sys.argv[3])
launch = lib.hipLaunchKernel
launch.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64]
launch.restype = ctypes.c_int
counter = ctypes.c_int(0)
where = ctypes.addressof(counter)


def loop(n):
    for _ in range(n):
        launch(where, 1, 2)


def nest(d, n):
    if d == 0:
        loop(n)
    else:
        nest(d - 1, n)


nest(depth, 5000)
t = time.perf_counter_ns()
nest(depth, calls)
dt = time.perf_counter_ns() - t
print(json.dumps({"ns_per_call": dt / calls, "calls": calls, "python_frames": depth + 3}))
sys.stdout.flush()
if len(sys.argv) > 4:
    time.sleep(float(sys.argv[4]))
