#!/usr/bin/env bash
# One call on a lent GPU machine (an H200, the mission's card; an H100 when none can be had): KataGo v1.17.2's CUDA
# backend built from source there, then the pinned network's layout and the previous pin's b40c768nbt qualified at
# the user's line, both as synthetic nets (their real cost, no download). docs/gpu-h200.md.
#
#   benchmarks/gpu_h200.sh [--rehearse] [--grid] [--deadline SECONDS]
#
# On the device (run from the repository root, $OUT comes back; nothing outside the machine can be reached):
#   needs .device/katago-v1.17.2-cpp-src.tar.gz (KataGo's cpp/ source; KG_SOURCE_TARBALL names another), .whl/*.whl
#   (the project's Python packages the machine lacks, for its Python; none: the installed ones), nvcc, cmake, a C++
#   compiler, cuDNN 9 (the nvidia-cudnn pip package will do), torch (the GEMM rate) and NVML.
#   1. builds the CUDA backend for the card (runtime/build_katago.sh: 85-102 s on 16 cores on the H100) while it
#      writes the two synthetic nets and describes them (nets.jsonl);
#   2. qualifies b11c768h12nbt3tflrs-fson-silu (the pinned layout, a transformer): katago benchmark and the user's
#      line `nnMaxBatchSize=64,128,256` (python -m kgbench.qualify --steps benchmark,line);
#   3. the same line for b40c768nbt (--steps line);
#   4. packs both results folders (reports, results.json, the jobs' MLflow stores and logs, not the nets), the build
#      log, the binary (gzipped) and a comparison with the sim's profiles and the H100's figures into $OUT.
#   The budgets share what is left of --deadline (default 560 s from the start: a 600 s call with time to pack).
# --grid: instead of 2-4, the node's users' own grid (docs/data/issue42/: `katago benchmark -threads T
#   -fixed-batch-size T -visits V -numpositions N`, T = 64..384, the release's gtp_example.cfg) on a synthetic
#   b28c512nbt, so the project's first H200 figures sit beside theirs on the same card: grid.tsv in their
#   summary.tsv's columns (positions cut to fit the call: KG_GRID_POSITIONS, default 10 a point), then
#   `python -m benchmarks.calibration.public_h200 --measured grid.tsv` puts both and the sim side by side.
# --rehearse: the same flow on the CPU build here (KGBENCH_KATAGO_BIN), no build, tiny nets of the same kinds
#   (b2c32h2nbttflrs, b2c32nbt) at the rehearsal scale: what can be checked before a GPU is at hand. $OUT defaults to
#   a new folder under /tmp.
set -uo pipefail
KG_SCRIPT=gpu_h200.sh
START=$SECONDS
rehearse=0
grid=0
deadline=560
while [ $# -gt 0 ]; do
  case "$1" in
    --rehearse) rehearse=1; shift ;;
    --grid) grid=1; shift ;;
    --deadline) deadline="${2:?--deadline needs seconds}"; shift 2 ;;
    -h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "$KG_SCRIPT: unknown argument $1" >&2; exit 2 ;;
  esac
done
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo" || exit 2
if [ -z "${OUT:-}" ]; then
  [ "$rehearse" -eq 1 ] || { echo "$KG_SCRIPT: \$OUT is not set (the device's results folder)" >&2; exit 2; }
  OUT="$(mktemp -d /tmp/gpu-h200-rehearsal.XXXXXX)"
fi
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
exec > >(tee "$OUT/run.log") 2>&1
log() { printf '[%4d s] %s\n' "$((SECONDS - START))" "$*"; }
left() { echo $((deadline - (SECONDS - START))); }
work="$(mktemp -d /tmp/kg-h200.XXXXXX)"

date -u
log "repository $(git rev-parse HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (with changes)')"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,compute_cap,temperature.gpu \
  --format=csv 2>&1 | tee "$OUT/device.csv" || true
nproc; free -g | head -2; python3 --version

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" .whl/*.whl \
    || { log "installing .whl/ failed"; exit 1; }
  export PYTHONPATH="$work/site:$repo${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
fi
PY=python3
[ "$rehearse" -eq 1 ] && PY="${KG_PYTHON:-python}"

if [ "$rehearse" -eq 1 ]; then
  backend=eigen scale=rehearsal
  pinned=b2c32h2nbttflrs previous=b2c32nbt  # the same kinds of layer (transformer, convnet) at a CPU's cost
  binary="${KGBENCH_KATAGO_BIN:?--rehearse runs the CPU build KGBENCH_KATAGO_BIN names}"
else
  backend=cuda scale=gpu
  pinned=b11c768h12nbt3tflrs-fson-silu previous=b40c768nbt
  binary="$work/kgcuda/katago"
  tarball="${KG_SOURCE_TARBALL:-$repo/.device/katago-v1.17.2-cpp-src.tar.gz}"
  [ -f "$tarball" ] || { log "no KataGo source at $tarball (KG_SOURCE_TARBALL)"; exit 1; }
  log "building KataGo's CUDA backend from $(basename "$tarball")"
  (runtime/build_katago.sh "$tarball" "$work/kgcuda" > "$OUT/build.log" 2>&1; echo "build exit $?" >> "$OUT/build.log") &
  build=$!
fi

if [ "$grid" -eq 1 ]; then
  pinned=b28c512nbt previous=""  # the users' net's layout (rehearsal: the tiny convnet)
  [ "$rehearse" -eq 1 ] && pinned=b2c32nbt
fi
mkdir -p "$work/nets"
for arch in $pinned $previous; do
  $PY -m kgbench.nets synth "$arch" "$work/nets/synthetic-$arch.bin" || exit 1
  $PY -m kgbench.nets flops "$work/nets/synthetic-$arch.bin" --json >> "$OUT/nets.jsonl"
done
log "synthetic nets written in $work/nets"

if [ "$rehearse" -eq 0 ]; then
  wait "$build"
  tail -3 "$OUT/build.log"
  [ -x "$binary" ] || { log "the build made no $binary"; exit 1; }
  strip -o "$work/katago.stripped" "$work/kgcuda/katago.bin" 2>/dev/null \
    && gzip -c "$work/katago.stripped" > "$OUT/katago-cuda-v1.17.2.gz"
fi
"$binary" version | head -3
log "build ready; $(left) s left"

if [ "$grid" -eq 1 ]; then
  # the users' grid: their thread counts and visits (rehearsal: a CPU's), one NN server thread as their cfg had
  cfg="$work/gtp_example.cfg"
  tar xzf "${KG_SOURCE_TARBALL:-$repo/.device/katago-v1.17.2-cpp-src.tar.gz}" -O --wildcards '*/cpp/configs/gtp_example.cfg' \
    > "$cfg" 2>/dev/null || tar xzf "${KG_SOURCE_TARBALL:-}" -O --wildcards '*configs/gtp_example.cfg' > "$cfg" || exit 1
  points="64:800 128:800 192:1200 256:2000 384:3000"
  [ "$rehearse" -eq 1 ] && points="1:16 2:16"  # the CPU build refuses a fixed batch at 4 threads here
  printf 'backend\tthreads\tbatch_size\tvisits\tnum_positions\tboard_size\tvisits_per_sec\n' > "$OUT/grid.tsv"
  for point in $points; do
    threads="${point%%:*}" visits="${point##*:}" positions="${KG_GRID_POSITIONS:-10}"
    [ "$(left)" -ge 40 ] || { log "no time left for $threads threads"; break; }
    log "katago benchmark: $threads threads = batch $threads, $visits visits, $positions positions"
    timeout "$(( $(left) - 20 ))" "$binary" benchmark -config "$cfg" -model "$work/nets/synthetic-$pinned.bin" \
      -threads "$threads" -visits "$visits" -numpositions "$positions" -boardsize 19 -fixed-batch-size "$threads" \
      > "$OUT/grid-t$threads.log" 2>&1
    rate="$(grep -Eo 'visits/s = [0-9.]+' "$OUT/grid-t$threads.log" | tail -1 | grep -Eo '[0-9.]+$')"
    printf '%s\t%s\t%s\t%s\t%s\t19\t%s\n' "$backend" "$threads" "$threads" "$visits" "$positions" "${rate:-}" \
      >> "$OUT/grid.tsv"
  done
  cat "$OUT/grid.tsv"
  $PY -m benchmarks.calibration.public_h200 --measured "$OUT/grid.tsv" | tee "$OUT/grid-compare.txt"
  log "done; $OUT:"
  ls -la "$OUT"
  rm -rf "$work"
  exit 0
fi

# the pinned layout gets 60% of what is left, the previous pin's line the rest (less ~25 s to pack)
budget_pinned=$(( ($(left) - 25) * 6 / 10 ))
log "qualifying $pinned: katago benchmark and the user's line, budget ${budget_pinned}s"
$PY -m kgbench.qualify --binary "$binary" --backend "$backend" --scale "$scale" --steps benchmark,line \
  --net "$work/nets/synthetic-$pinned.bin" --budget "${budget_pinned}s" --out "$work/q-$pinned"
log "qualify $pinned exit $?; $(left) s left"
budget_previous=$(( $(left) - 25 ))
if [ "$budget_previous" -ge 60 ]; then
  log "qualifying $previous at the user's line, budget ${budget_previous}s"
  $PY -m kgbench.qualify --binary "$binary" --backend "$backend" --scale "$scale" --steps line \
    --net "$work/nets/synthetic-$previous.bin" --budget "${budget_previous}s" --out "$work/q-$previous"
  log "qualify $previous exit $?; $(left) s left"
else
  log "no time left for $previous (${budget_previous} s)"
fi

for q in "$work"/q-*; do
  [ -d "$q" ] || continue
  name="$(basename "$q")"
  cp "$q/report.md" "$OUT/$name-report.md" 2>/dev/null
  cp "$q/results.json" "$OUT/$name-results.json" 2>/dev/null
  tar czf "$OUT/$name-folder.tgz" -C "$work" --exclude="$name/nets" --exclude='*.bin' --exclude='*.bin.gz' "$name"
done
$PY -m benchmarks.device_compare "$OUT"/q-*-results.json --out "$OUT/compare.md" || log "no comparison written"
log "done; $OUT:"
ls -la "$OUT"
rm -rf "$work"
