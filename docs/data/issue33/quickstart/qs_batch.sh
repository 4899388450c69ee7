#!/bin/bash
# qs_batch.sh CLONE OUTROOT FIRST LAST: qs_once.sh runs FIRST..LAST (run under `flock /tmp/kg-measure.lock`)
here=$(cd "$(dirname "$0")" && pwd)
export KGSERVE_SIM_DEVICE=served-qs KGBENCH_CONTENTION_CHECK=false
for i in $(seq "$3" "$4"); do
  "$here/qs_once.sh" "$1" "$2/run$i"
done
