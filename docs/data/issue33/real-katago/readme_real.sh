#!/bin/bash
# readme_real.sh CLONE OUT STEP: the README's "On a real KataGo" commands in CLONE, STEP sweep | promote-verify
# (run each under `flock /tmp/kg-measure.lock`). KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL come from the caller.
# KGBENCH_CONTENTION_CHECK=false: other helpers' work ran throughout (with it on, every job is flagged and promote
# refuses them).
clone=$1; out=$2; step=$3; mkdir -p "$out"
: "${KGBENCH_KATAGO_BIN:?}" "${KGBENCH_KATAGO_MODEL:?}"
cd "$clone" || exit 2
unset MLFLOW_TRACKING_URI; export KGBENCH_CONTENTION_CHECK=false
echo "$step start $(date +%T) uptime: $(uptime)" >> "$out/log.txt"
if [ "$step" = sweep ]; then
  rm -rf mlflow.db mlruns/* runtime/eigen multirun
  git log --oneline -1 > "$out/commit.txt"
  timeout 570 python -m kgbench -m backend=eigen threads=cpu load=cpu nnMaxBatchSize=4,8 engine.binary=$KGBENCH_KATAGO_BIN engine.model=$KGBENCH_KATAGO_MODEL > "$out/sweep.out" 2>&1
  echo "sweep rc=$?" >> "$out/log.txt"
else
  timeout 120 python -m kgbench.promote --runtime-dir runtime/eigen > "$out/promote.out" 2>&1; echo "promote rc=$?" >> "$out/log.txt"
  timeout 300 python -m kgbench.promote --verify --config runtime/eigen/config.yaml > "$out/verify.out" 2>&1; echo "verify rc=$?" >> "$out/log.txt"
fi
echo "$step end $(date +%T) uptime: $(uptime)" >> "$out/log.txt"
