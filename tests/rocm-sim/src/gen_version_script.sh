#!/bin/sh
# Generate a GNU ld version script from "<version-node> <symbol>" lines taken from the real
# ROCm library, so the simulator defines exactly the same symbol versions (hipMalloc@@hip_4.2).
# usage: gen_version_script.sh hip|hsa symbols.txt
kind=$1
list=$2
if [ "$kind" = hsa ]; then
  echo "ROCR_1 {"
  echo "  global:"
  awk '{print "    " $2 ";"}' "$list"
  echo "    rocm_sim_*;"
  echo "  local: *;"
  echo "};"
  exit 0
fi
prev=""
for node in $(awk '{print $1}' "$list" | uniq); do
  echo "$node {"
  echo "  global:"
  awk -v n="$node" '$1 == n {print "    " $2 ";"}' "$list"
  if [ -z "$prev" ]; then echo "  local: *;"; echo "};"; else echo "} $prev;"; fi
  prev=$node
done
# Symbols newer than ROCm 5.2 (present in later ROCm releases / custom builds).
cat <<EOV
hip_6.0 {
  global:
    hipGetDevicePropertiesR0600;
    hipExtModuleLaunchKernel;
    hipLaunchHostFunc;
} $prev;
hip_7.0 {
  global:
    hipProfilerEnableExt;
    hipProfilerDisableExt;
    hipProfilerGetRecordsExt;
    hipProfilerResetExt;
    hipProfilerRegisterChunkCallbackExt;
} hip_6.0;
EOV
