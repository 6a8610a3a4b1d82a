#!/bin/sh
# rocm-sim self-test helper: N processes (fork+exec, one per simulated GPU) write one truth file.
# usage: multiproc.sh KERNELS_BIN N
bin=$1; n=$2; i=0; pids=""
while [ $i -lt $n ]; do
  HIP_VISIBLE_DEVICES=$i "$bin" 20 2 > /dev/null &
  pids="$pids $!"
  i=$((i + 1))
done
rc=0
for p in $pids; do wait $p || rc=1; done
exit $rc
