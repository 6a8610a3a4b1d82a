#!/bin/sh
# rocm-sim self-test. Builds the simulator and its test programs, runs them on it and checks the
# ground truth, the profiler records and an HSA tool's view against each other.
# Prints one line per check and a final "N passed, M failed"; exit status 1 if anything failed.
# Needs: g++, gcc, python3 (with the perfetto protos), hipcc and Debian's real libamdhip64 (packages
# hipcc, libamdhip64-5): a missing prerequisite is a failed check, never a silent skip.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE"
LIB=$HERE/build/lib
BT=$HERE/build/tests
TMP=$(mktemp -d /tmp/rocm-sim-selftest.XXXXXX)
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "PASS  $1"; }
ko() { FAIL=$((FAIL + 1)); echo "FAIL  $1"; [ -n "${2:-}" ] && [ -f "$2" ] && sed 's/^/      /' "$2" | tail -20; }
check() {  # check NAME LOG cmd...
  name=$1; log=$2; shift 2
  if "$@" > "$log" 2>&1; then ok "$name"; else ko "$name" "$log"; fi
}
sim() { env LD_LIBRARY_PATH="$LIB" "$@"; }
CT="python3 $HERE/tests/check_truth.py"
# GPU ops of `kernels NODES REPLAYS` on the simulator's 8 devices (tests/kernels.hip): 6 launches
# + 2 symbol copies + a host function + a stream callback, the graph's NODES x REPLAYS, and 4
# threads x (25 kernels + 25 memsets + 1 kernel + an event record + a stream wait).
kernel_ops() { echo $(($1 * $2 + 10 + 4 * 53)); }

# ---------------------------------------------------------------- build
t0=$(date +%s)
check "build: make" "$TMP/make.log" make -s
t1=$(date +%s)
if [ $((t1 - t0)) -lt 60 ]; then ok "build: under a minute ($((t1 - t0)) s)"; else ko "build: took $((t1 - t0)) s"; fi
if make -q 2>/dev/null; then ok "build: idempotent (make -q: nothing to do)"; else ko "build: make -q says work remains"; fi
for f in libamdhip64.so libamdhip64.so.5 libamdhip64.so.7 libhsa-runtime64.so.1 libroctx64.so libroctx64.so.4; do
  [ -e "$LIB/$f" ] || { ko "build: $f missing"; continue; }
done
ok "build: libraries and soname links present"

mkdir -p "$BT"
HIPFLAGS="-O1 -g -D__HIP_PLATFORM_AMD__ -I$HERE/include"
check "compile: api_c.c against the real ROCm headers and library" "$TMP/cc1.log" \
  gcc $HIPFLAGS tests/api_c.c -o "$BT/api_c" -lamdhip64
check "compile: prof_consumer.c" "$TMP/cc2.log" \
  gcc $HIPFLAGS tests/prof_consumer.c -o "$BT/prof_consumer" -lamdhip64 -lpthread -ldl -lstdc++
check "compile: roctx_test.c" "$TMP/cc3.log" \
  gcc $HIPFLAGS tests/roctx_test.c -o "$BT/roctx_test" -L"$LIB" -lroctx64 -lamdhip64
check "compile: hsa_tool.cpp (HSA_TOOLS_LIB, real hsa_api_trace.h)" "$TMP/cc4.log" \
  g++ -std=c++17 -O1 -g -fPIC -shared -DAMD_INTERNAL_BUILD -I/usr/include/hsa tests/hsa_tool.cpp \
  -o "$BT/libhsa_sim_tool.so" -pthread
HAVE_HIPCC=0
if command -v hipcc > /dev/null 2>&1; then
  if hipcc --offload-arch=gfx90a tests/kernels.hip -o "$BT/kernels" > "$TMP/hipcc.log" 2>&1; then
    HAVE_HIPCC=1; ok "compile: kernels.hip with hipcc (__global__, <<<>>>)"
  else ko "compile: kernels.hip with hipcc" "$TMP/hipcc.log"; fi
else
  ko "compile: hipcc not found (Debian package hipcc): the kernel, multiprocess and HSA checks cannot run"
fi

# ---------------------------------------------------------------- ABI
# every symbol the simulator shares with Debian's real libamdhip64 carries the same version node
REAL=/usr/lib/x86_64-linux-gnu/libamdhip64.so.5
if [ ! -e "$REAL" ]; then
  ko "abi: Debian's real $REAL is missing (package libamdhip64-5): the ABI checks against it cannot run"
else
  objdump -T "$LIB/libamdhip64.so.5" | grep -v '\*UND\*' | awk 'NF>=2 {print $(NF-1), $NF}' | sort > "$TMP/sim.syms"
  awk 'NR==FNR {real[$2]=$1; next} ($2 in real) && real[$2] != $1 {print "version mismatch:", $2, $1, "real", real[$2]; bad=1} END {exit bad}' \
    src/hip_symbols.txt "$TMP/sim.syms" > "$TMP/ver.log" 2>&1 && ok "abi: symbol versions equal the real library's" || ko "abi: symbol versions" "$TMP/ver.log"
  n=$(awk 'NR==FNR {real[$2]=1; next} ($2 in real)' src/hip_symbols.txt "$TMP/sim.syms" | wc -l)
  echo "      ($n of $(wc -l < src/hip_symbols.txt) real hip_* symbols implemented)"
fi
# like Debian's real library, every exported hip* function starts with `push %rbp` (cheap uprobes)
objdump -T "$LIB/libamdhip64.so.5" | grep -v '\*UND\*' | awk '{print $NF}' | grep '^hip' | sort -u > "$TMP/hipsyms"
objdump -d --no-show-raw-insn "$LIB/libamdhip64.so.5" > "$TMP/dis"
python3 - "$TMP/hipsyms" "$TMP/dis" > "$TMP/pro.log" 2>&1 <<'EOF2' && ok "abi: every exported hip* function starts with push %rbp" || ko "abi: prologues" "$TMP/pro.log"
import re, sys
syms = set(open(sys.argv[1]).read().split())
lines = open(sys.argv[2]).read().split("\n")
bad = []
for i, l in enumerate(lines):
    m = re.match(r"^[0-9a-f]+ <([^>@]+)>:", l)
    if m and m.group(1) in syms and not lines[i + 1].split("\t")[-1].strip().startswith("push   %rbp"):
        bad.append(m.group(1))
print("not push %rbp:", bad) if bad else None
sys.exit(1 if bad else 0)
EOF2
if objdump -p "$LIB/libamdhip64.so.5" | grep -q 'SONAME *libamdhip64.so.5' && objdump -p "$LIB/libhsa-runtime64.so.1" | grep -q 'SONAME *libhsa-runtime64.so.1'; then
  ok "abi: sonames"; else ko "abi: sonames"; fi
if sim ldd "$BT/api_c" | grep libamdhip64 | grep -q "$LIB"; then ok "abi: a real-ROCm-linked binary resolves to the simulator"; else ko "abi: ldd" ; fi

# ---------------------------------------------------------------- API semantics + truth
rm -f "$TMP/api.jsonl"
check "api_c: runs unchanged on the simulator" "$TMP/api_c.log" sim ROCM_SIM_TRUTH="$TMP/api.jsonl" "$BT/api_c"
# api_c.c's GPU ops: a fixed program, so a lost (or invented) op changes the count.
check "api_c: ground truth consistent" "$TMP/api_ct.log" $CT "$TMP/api.jsonl" --expect-graph-batch 12,4 --expect-ops 92
if [ -e "$REAL" ]; then
  "$BT/api_c" > "$TMP/real.log" 2>&1; rc=$?
  if [ $rc -eq 2 ] && grep -q "no device" "$TMP/real.log"; then ok "api_c: same binary on the real library reports no device"; else ko "api_c on real library (rc $rc)" "$TMP/real.log"; fi
fi

if [ $HAVE_HIPCC = 1 ]; then
  rm -f "$TMP/k.jsonl"
  check "kernels: hipcc program runs on the simulator" "$TMP/k.log" \
    sim ROCM_SIM_TRUTH="$TMP/k.jsonl" ROCM_SIM_KERNEL_NS="long_kernel=200000,ns::templ_kernel<float>=7000" "$BT/kernels" 200 3
  check "kernels: truth consistent (queues, streams, syncs, per-kernel durations)" "$TMP/kct.log" \
    $CT "$TMP/k.jsonl" --expect-ops "$(kernel_ops 200 3)" --expect-graph-batch 200 --kernel-ns _Z11long_kernelPf=200000 --kernel-ns _ZN2ns12templ_kernelIfEEvPT_S1_=7000
  check "kernels: elapsed time of a 200 us kernel measured by events" "$TMP/kel.log" grep -q "elapsed 0.200 ms" "$TMP/k.log"
  python3 - "$TMP/k.jsonl" > "$TMP/kn.log" 2>&1 <<'EOF' && ok "kernels: names from __hipRegisterFunction (mangled + demangled)" || ko "kernels: names" "$TMP/kn.log"
import json, sys
ks = {(o.get("kernel"), o.get("kernel_demangled")) for o in map(json.loads, open(sys.argv[1])) if o.get("op") == "dispatch"}
need = {("_Z12small_kernelPfi", "small_kernel(float*, int)"), ("_Z11long_kernelPf", "long_kernel(float*)"),
        ("_ZN2ns12templ_kernelIfEEvPT_S1_", "void ns::templ_kernel<float>(float*, float)")}
missing = need - ks
print("missing", missing) if missing else None
sys.exit(1 if missing else 0)
EOF
  python3 - "$TMP/k.jsonl" > "$TMP/kf.log" 2>&1 <<'EOF' && ok "kernels: every launch form recorded" || ko "kernels: launch forms" "$TMP/kf.log"
import json, sys
names = {o["name"] for o in map(json.loads, open(sys.argv[1])) if o["type"] == "api"}
need = {"hipLaunchKernel", "hipExtLaunchKernel", "hipLaunchCooperativeKernel", "hipGraphLaunch", "hipStreamBeginCapture",
        "hipStreamEndCapture", "hipGraphInstantiate", "hipStreamWaitEvent", "hipEventRecord"}
print("missing", need - names) if need - names else None
sys.exit(1 if need - names else 0)
EOF
  # several processes, one per simulated GPU, one truth file
  rm -f "$TMP/mp.jsonl"
  check "multiprocess: 4 workers (HIP_VISIBLE_DEVICES) share one truth file" "$TMP/mp.log" \
    sim ROCM_SIM_TRUTH="$TMP/mp.jsonl" sh tests/multiproc.sh "$BT/kernels" 4
  # one device each: (20 nodes x 2 replays + 10 + 1 thread x 53) per worker
  check "multiprocess: truth consistent, every line intact" "$TMP/mpct.log" $CT "$TMP/mp.jsonl" --expect-graph-batch 20 --expect-ops $((4 * (20 * 2 + 10 + 53)))
  np=$(python3 -c "import json,sys; print(len({json.loads(l)['pid'] for l in open(sys.argv[1])}))" "$TMP/mp.jsonl")
  [ "$np" = 4 ] && ok "multiprocess: 4 pids in the truth" || ko "multiprocess: $np pids"
fi

# ---------------------------------------------------------------- profiler API
rm -f "$TMP/p.jsonl" "$TMP/pt.jsonl"
# prof_consumer.c's own count of GPU ops, whatever the chunking or the API version
PROF_OPS=326
check "profiler v0.1.0: consumer (dlsym, chunks, guard, thread_id == _Hash_bytes)" "$TMP/p.log" \
  sim ROCM_SIM_TRUTH="$TMP/pt.jsonl" "$BT/prof_consumer" "$TMP/p.jsonl"
check "profiler v0.1.0: records equal the truth (names, times, thread ids, GPU ops, spill lists)" "$TMP/pct.log" \
  $CT "$TMP/pt.jsonl" --profiler "$TMP/p.jsonl" --expect-graph-batch 51 --expect-ops $PROF_OPS
rm -f "$TMP/p16.jsonl" "$TMP/pt16.jsonl"
check "profiler v0.1.0: chunk size 16 (many chunks, partial last)" "$TMP/p16.log" \
  sim ROCM_SIM_PROFILER_CHUNK=16 ROCM_SIM_TRUTH="$TMP/pt16.jsonl" "$BT/prof_consumer" "$TMP/p16.jsonl"
check "profiler v0.1.0: chunk 16 records equal the truth" "$TMP/p16ct.log" $CT "$TMP/pt16.jsonl" --profiler "$TMP/p16.jsonl" --expect-ops $PROF_OPS
rm -f "$TMP/pcb.jsonl" "$TMP/ptcb.jsonl"
check "profiler v0.1.0: chunk callback (slow drain 2 ms/chunk)" "$TMP/pcb.log" \
  sim ROCM_SIM_PROFILER_CHUNK=16 ROCM_SIM_PROFILER_DRAIN_DELAY_US=2000 ROCM_SIM_TRUTH="$TMP/ptcb.jsonl" "$BT/prof_consumer" "$TMP/pcb.jsonl" callback
check "profiler v0.1.0: callback records equal the truth" "$TMP/pcbct.log" $CT "$TMP/ptcb.jsonl" --profiler "$TMP/pcb.jsonl" --expect-ops $PROF_OPS
rm -f "$TMP/p0.jsonl" "$TMP/pt0.jsonl"
check "profiler v0: older API (Enable(void), Reset present, no callback)" "$TMP/p0.log" \
  sim ROCM_SIM_PROFILER=v0 ROCM_SIM_TRUTH="$TMP/pt0.jsonl" "$BT/prof_consumer" "$TMP/p0.jsonl"
check "profiler v0: records equal the truth" "$TMP/p0ct.log" $CT "$TMP/pt0.jsonl" --profiler "$TMP/p0.jsonl" --expect-ops $PROF_OPS
sim ROCM_SIM_PROFILER=none "$BT/prof_consumer" "$TMP/pn.jsonl" > "$TMP/pn.log" 2>&1; rc=$?
[ $rc -eq 3 ] && ok "profiler none: all five symbols resolve to NULL (stock ROCm)" || ko "profiler none (rc $rc)" "$TMP/pn.log"
rm -f "$TMP/go.jsonl"; mkdir -p "$TMP/out"
check "profiler: GPU_CLR_PROFILE_OUTPUT activates at start and writes a pid-suffixed file" "$TMP/go.log" \
  sim GPU_CLR_PROFILE_OUTPUT="$TMP/out/trace.json" ROCM_SIM_TRUTH="$TMP/go.jsonl" "$BT/api_c"
ls "$TMP"/out/trace.*.json > /dev/null 2>&1 && grep -q '"api":"hipMalloc"' "$TMP"/out/trace.*.json \
  && ok "profiler: output file has the records" || ko "profiler: output file missing"
grep -q '"profiled":true' "$TMP/go.jsonl" && ok "profiler: records taken from the first call" || ko "profiler: not active at start"
if python3 -c "import perfetto.protos.perfetto.trace.perfetto_trace_pb2" 2> /dev/null; then
  sim GPU_CLR_PROFILE_OUTPUT="$TMP/out/clr.pftrace" "$BT/api_c" > "$TMP/pf.log" 2>&1
  python3 - "$TMP"/out/clr.*.pftrace > "$TMP/pfc.log" 2>&1 <<'EOF2' && ok "profiler: .pftrace output parses with Perfetto's protos (API + GPU slices)" || ko "profiler: pftrace" "$TMP/pfc.log"
import sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], "rb").read())
names = [p.track_event.name for p in t.packet if p.HasField("track_event") and p.track_event.type == 1]
tracks = [p.track_descriptor.name for p in t.packet if p.HasField("track_descriptor")]
ok = "hipMalloc" in names and "_Z4axpyPfS_f" not in names and "axpy(float*, float*, float)" in names and any(n.startswith("GPU 0 queue") for n in tracks)
print(len(names), "slices", tracks[:4])
sys.exit(0 if ok else 1)
EOF2
else
  ko "profiler: the python perfetto protos are not installed (pip package perfetto): the .pftrace check cannot run"
fi

# ---------------------------------------------------------------- HSA tools interface
if [ $HAVE_HIPCC = 1 ]; then
  rm -f "$TMP/h.jsonl" "$TMP/tool.jsonl"
  check "hsa: HSA_TOOLS_LIB OnLoad, queue intercept, signal capture; program unaffected" "$TMP/h.log" \
    sim HSA_TOOLS_LIB="$BT/libhsa_sim_tool.so" HSA_SIM_TOOL_OUT="$TMP/tool.jsonl" ROCM_SIM_TRUTH="$TMP/h.jsonl" "$BT/kernels" 50 3
  check "hsa: dispatch times and .kd names equal the truth; graph replays arrive as batches" "$TMP/hct.log" \
    $CT "$TMP/h.jsonl" --expect-ops "$(kernel_ops 50 3)" --expect-graph-batch 50 --hsa-tool "$TMP/tool.jsonl"
  rm -f "$TMP/hd.jsonl" "$TMP/toold.jsonl"
  check "hsa: ROCM_SIM_GPU_TICK_ORIGIN=device: ticks need convert_tick_to_system_domain" "$TMP/hd.log" \
    sim ROCM_SIM_GPU_TICK_ORIGIN=device HSA_TOOLS_LIB="$BT/libhsa_sim_tool.so" HSA_SIM_TOOL_OUT="$TMP/toold.jsonl" ROCM_SIM_TRUTH="$TMP/hd.jsonl" "$BT/kernels" 20 1
  check "hsa: converted device ticks equal the truth" "$TMP/hdct.log" $CT "$TMP/hd.jsonl" --expect-ops "$(kernel_ops 20 1)" --hsa-tool "$TMP/toold.jsonl"
  rm -f "$TMP/hb.jsonl" "$TMP/toolb.jsonl"
  check "hsa: a tool injecting signals into graph batches works on fixed ROCm" "$TMP/hb.log" \
    sim HSA_SIM_TOOL_INJECT_BATCHES=1 HSA_TOOLS_LIB="$BT/libhsa_sim_tool.so" HSA_SIM_TOOL_OUT="$TMP/toolb.jsonl" ROCM_SIM_TRUTH="$TMP/hb.jsonl" "$BT/kernels" 30 2
  check "hsa: ... and captures graph dispatch times too" "$TMP/hbct.log" $CT "$TMP/hb.jsonl" --expect-ops "$(kernel_ops 30 2)" --hsa-tool "$TMP/toolb.jsonl" --hsa-tool-graph
  sim ROCM_SIM_INTERCEPT_BATCH_BUG=1 HSA_SIM_TOOL_INJECT_BATCHES=1 HSA_TOOLS_LIB="$BT/libhsa_sim_tool.so" "$BT/kernels" 30 2 > "$TMP/hbb.log" 2>&1; rc=$?
  [ $rc -ne 0 ] && grep -q 0x1009 "$TMP/hbb.log" && ok "hsa: ROCM_SIM_INTERCEPT_BATCH_BUG=1 aborts such a tool with 0x1009" || ko "hsa: batch bug switch (rc $rc)" "$TMP/hbb.log"
  timeout 5 env LD_LIBRARY_PATH="$LIB" ROCM_SIM_INTERCEPT=hang HSA_TOOLS_LIB="$BT/libhsa_sim_tool.so" "$BT/kernels" 5 1 > "$TMP/hh.log" 2>&1; rc=$?
  [ $rc -eq 124 ] && ok "hsa: ROCM_SIM_INTERCEPT=hang hangs an intercepted application (killed after 5 s)" || ko "hsa: hang switch (rc $rc)" "$TMP/hh.log"
  rm -f "$TMP/hu.jsonl" "$TMP/toolu.jsonl"
  check "hsa: ROCM_SIM_INTERCEPT=unsupported: tool falls back, program unaffected" "$TMP/hu.log" \
    sim ROCM_SIM_INTERCEPT=unsupported HSA_TOOLS_LIB="$BT/libhsa_sim_tool.so" HSA_SIM_TOOL_OUT="$TMP/toolu.jsonl" "$BT/kernels" 10 1
  grep -q '"intercepted_queues":0,"unsupported":[1-9]' "$TMP/toolu.jsonl" && ok "hsa: intercept reported unsupported" || ko "hsa: unsupported switch" "$TMP/toolu.jsonl"
fi

# ---------------------------------------------------------------- failure switches, roctx
rm -f "$TMP/f.jsonl"
sim ROCM_SIM_FAIL=hipMalloc:2@2 ROCM_SIM_TRUTH="$TMP/f.jsonl" "$BT/api_c" > "$TMP/f.log" 2>&1; rc=$?
python3 - "$TMP/f.jsonl" <<'EOF' > "$TMP/fc.log" 2>&1
import json, sys
m = [o for o in map(json.loads, open(sys.argv[1])) if o.get("name") == "hipMalloc"]
sys.exit(0 if len(m) >= 2 and m[0]["ret"] == 0 and m[1]["ret"] == 2 and all(o["ret"] == 0 for o in m[2:]) else 1)
EOF
[ $? -eq 0 ] && [ $rc -ne 0 ] && ok "fail switch: ROCM_SIM_FAIL=hipMalloc:2@2 fails exactly the 2nd hipMalloc" || ko "fail switch (rc $rc)" "$TMP/fc.log"
if [ $HAVE_HIPCC = 1 ]; then
  rm -f "$TMP/x.jsonl"
  sim ROCM_SIM_EXIT_MID_KERNEL=3 ROCM_SIM_KERNEL_NS="long_kernel=100000" ROCM_SIM_TRUTH="$TMP/x.jsonl" "$BT/kernels" > "$TMP/x.log" 2>&1; rc=$?
  nd=$(grep -c '"op":"dispatch"' "$TMP/x.jsonl")
  [ $rc -eq 3 ] && [ "$nd" -eq 2 ] && ok "fail switch: ROCM_SIM_EXIT_MID_KERNEL=3 exits (status 3) during the 3rd kernel" || ko "exit mid kernel (rc $rc, $nd dispatches)" "$TMP/x.log"
fi
rm -f "$TMP/r.jsonl"
check "roctx: push/pop/start/stop/mark" "$TMP/r.log" sim ROCM_SIM_TRUTH="$TMP/r.jsonl" "$BT/roctx_test"
grep -q '"name":"roctxRangePushA".*"text":"inner"' "$TMP/r.jsonl" && grep -q '"name":"roctxMarkA".*"text":"start"' "$TMP/r.jsonl" \
  && ok "roctx: truth lines carry the text" || ko "roctx truth" "$TMP/r.jsonl"

echo "$PASS passed, $FAIL failed"
[ $FAIL -eq 0 ] && rm -rf "$TMP" || echo "(logs kept in $TMP)"
[ $FAIL -eq 0 ]
