#!/bin/bash
# issue 33 item 1, the wait rule: each command's output with uptime before/after, into $OUT/<name>.txt
set -u
# run from the checkout's root, with KGBENCH_KATAGO_BIN / KGBENCH_KATAGO_MODEL set (the CPU KataGo and its b6c96 net),
# OLD a checkout of 8f8c6c5 for the A/B steps, OUT the folder for the output; under `flock /tmp/kg-measure.lock`
ROOT=$PWD
OLD=${OLD:-../old}
OUT=$(realpath -m "${OUT:-measure-out}")
mkdir -p "$OUT"
run() {  # name, command...
  local name=$1; shift
  {
    echo "## code: $(git rev-parse --short HEAD) ($PWD); uptime before: $(uptime)"
    echo "## $*"
    "$@" 2>&1
    echo "## exit $? ; uptime after: $(uptime)"
  } >> "$OUT/$name.txt"
}
for step in "$@"; do
  case $step in
    k4) run lone-katago-4threads .venv/bin/python -m benchmarks.dispatch.lone --engine katago --threads 4 --visits 100 --rounds 3 --measure-s 40 ;;
    sim) run lone-sim-128threads .venv/bin/python -m benchmarks.dispatch.lone --engine sim --threads 128 --visits 100 --in-flight 256 --connections 4 --rounds 3 ;;
    k2) run lone-katago-2threads .venv/bin/python -m benchmarks.dispatch.lone --engine katago --threads 2 --visits 100 --rounds 3 --measure-s 40 ;;
    k4n) run lend-newcomer .venv/bin/python -m benchmarks.dispatch.lone --engine katago --threads 4 --visits 100 --rounds 2 --measure-s 40 --newcomer ;;
    hog) run slot-hog .venv/bin/python -m benchmarks.hostile --only slot-hog --attack-seconds 20 --slot-connections 80 --slot-queries 16 --slot-visits 400
         run slot-hog .venv/bin/python -m benchmarks.hostile --only slot-hog
         run slot-hog .venv/bin/python -m benchmarks.hostile --only slot-hog --attack-seconds 20 --slot-connections 80 --slot-queries 16 --slot-visits 50 ;;
    k10) run lone-katago-10visits .venv/bin/python -m benchmarks.dispatch.lone --engine katago --threads 4 --visits 10 --rounds 2 --measure-s 20
         run lone-katago-10visits .venv/bin/python -m benchmarks.dispatch.lone --engine katago --threads 2 --visits 10 --rounds 2 --measure-s 20 ;;
    sim10) run lone-sim-128threads .venv/bin/python -m benchmarks.dispatch.lone --engine sim --threads 128 --visits 10 --in-flight 256 --connections 4 --rounds 2 ;;
    rev) run reviews .venv/bin/python -m benchmarks.dispatch.reviews --rounds 1 ;;
  esac
done
# A/B of the slot hog: main before the wait rule (8f8c6c5, $OLD) and this code, alternating
if [ "${AB:-}" = 1 ]; then
  for _ in 1 2; do
    for code in old new; do
      for v in 50 100; do
        if [ $code = old ]; then dir=$OLD; else dir=$ROOT; fi
        (cd $dir && run slot-hog-ab $ROOT/.venv/bin/python -m benchmarks.hostile --only slot-hog --attack-seconds 20 --slot-connections 80 --slot-queries 16 --slot-visits $v)
      done
    done
  done
fi
# A/B of a lone client at 2 threads x 10 visits: main before the wait rule (8f8c6c5) and this code, alternating
if [ "${AB2:-}" = 1 ]; then
  for _ in 1 2; do
    for code in old new; do
      if [ $code = old ]; then dir=$OLD; else dir=$ROOT; fi
      (cd $dir && run lone-2x10-ab $ROOT/.venv/bin/python -m benchmarks.dispatch.lone --engine katago --threads 2 --visits 10 --rounds 1 --measure-s 20)
    done
  done
fi
# A/B of a lone client on the sim at 128 threads x 10 visits: 8f8c6c5 and this code, alternating
if [ "${AB3:-}" = 1 ]; then
  for _ in 1 2; do
    for code in old new; do
      if [ $code = old ]; then dir=$OLD; else dir=$ROOT; fi
      (cd $dir && run lone-sim10-ab $ROOT/.venv/bin/python -m benchmarks.dispatch.lone --engine sim --threads 128 --visits 10 --in-flight 256 --connections 4 --rounds 1)
    done
  done
fi
