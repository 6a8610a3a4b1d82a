#!/usr/bin/env python3
# Spawn -> "functions probed" for `rtl-ebpf attach --pid PID` (what a user waits for), N times.
#   python3 tests/bench/spawn_to_probed.py BIN PID N   (PID: e.g. hot_loop --api getdevicecount --calls 1 --wait-signal)
import subprocess, time, sys, statistics, os, signal
binp, pid, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
res = []; att = []
for i in range(n):
    t0 = time.monotonic()
    p = subprocess.Popen([binp, "attach", "--pid", pid, "--quiet", "--force", "--gpu", "none", "-o", "/tmp/spawn_to_probed.db"], stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if "functions probed" in line:
            res.append((time.monotonic() - t0) * 1e3); att.append(float(line.split(" in ")[-1].split()[0])); break
    p.send_signal(signal.SIGINT); p.communicate(); time.sleep(0.3)
print(f"{binp}: spawn -> 'functions probed' median {statistics.median(res):.1f} ms (all {[round(x) for x in res]}); attach_ms printed median {statistics.median(att):.0f}")
