#!/bin/bash
# qs_once.sh CLONE OUT: the README's first command once, after its install step (done once beforehand): the
# sweep && promote chain from a fresh MLflow store and no scratch runtime, then kgserve serving the scratch runtime
# (on a free port instead of 9100, another helper's port), one sample answered, kgserve stopped (SIGTERM).
# On the shared machine: KGBENCH_CONTENTION_CHECK=false (set by the caller: otherwise other helpers' work flags
# every job and promote sets them aside, which a quiet machine would not do) and a simulated device of its own
# (KGSERVE_SIM_DEVICE, so other helpers' sims do not share its simulated GPU).
clone=$1; out=$2; mkdir -p "$out"
cd "$clone" && rm -rf mlflow.db mlruns/* runtime/scratch multirun outputs
unset MLFLOW_TRACKING_URI
echo "start $(date +%T) uptime: $(uptime)" > "$out/log.txt"
s=$(date +%s.%N)
timeout 600 python -m kgbench -m backend=sim nnMaxBatchSize=8,32 load=smoke > "$out/sweep.out" 2>&1 \
  && timeout 120 python -m kgbench.promote --allow-simulated > "$out/promote.out" 2>&1
rc=$?
e=$(date +%s.%N)
echo "chain_rc=$rc secs=$(echo "$e - $s" | bc)" >> "$out/log.txt"
serve=skipped
if [ $rc = 0 ]; then
  timeout 120 python -m kgserve --config runtime/scratch/config.yaml --port 0 > "$out/kgserve.log" 2>&1 &
  kpid=$!
  url=
  for i in $(seq 1 120); do
    url=$(grep -o "kgserve listening on http://[0-9.:]*" "$out/kgserve.log" | head -1 | sed 's/kgserve listening on //')
    if [ -n "$url" ] && curl -sf "$url/readyz" > /dev/null; then break; fi; sleep 0.5
  done
  if [ -n "$url" ] && curl -sf --max-time 60 --data-binary @assets/analysis/inputs/lategame_19x19.json "$url/analysis" | grep -q moveInfos; then
    serve=answered
  else
    serve=FAILED
  fi
  kill $kpid; wait $kpid
fi
echo "serve=$serve end $(date +%T) uptime: $(uptime)" >> "$out/log.txt"
grep -h " FINISHED \| FAILED " "$out/sweep.out" | grep "sim b" >> "$out/log.txt"
grep -h "best job is\|contended jobs\|no run to promote\|nothing to promote" "$out/sweep.out" >> "$out/log.txt"
grep -h "promoted run\|error:\|^wrote" "$out/promote.out" >> "$out/log.txt" 2>/dev/null
