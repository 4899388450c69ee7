#!/bin/bash
# device run 1 (see .device/run1.py)
set -u
export PYTHONUNBUFFERED=1
D=$PWD/.device
START=$SECONDS
exec > >(tee "$OUT/run1.log") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,compute_cap,pstate,temperature.gpu --format=csv
nproc; free -g | head -2; python3 --version; python3 -c "import torch, pynvml; print('torch', torch.__version__, torch.version.cuda)"; nvcc --version | tail -2; cmake --version | head -1; gcc --version | head -1
(runtime/build_katago.sh "$D/katago-v1.17.2-cpp-src.tar.gz" /tmp/kgcuda --arch 90 > "$OUT/build.log" 2>&1; echo "build rc=$?" >> "$OUT/build.log") &
BUILD=$!
python3 -m kgbench.qualify.gemm --json | tee "$OUT/gemm.jsonl"
mkdir -p /tmp/nets
python3 -m kgbench.nets synth b40c768nbt /tmp/nets/synthetic-b40c768nbt.bin
python3 -m kgbench.nets synth b18c384nbt /tmp/nets/synthetic-b18c384nbt.bin
for m in "$D/b10c384h6nbttflrs.bin.gz" /tmp/nets/synthetic-b40c768nbt.bin /tmp/nets/synthetic-b18c384nbt.bin; do python3 -m kgbench.nets flops "$m" --json; done | tee "$OUT/nets.jsonl"
wait $BUILD; tail -5 "$OUT/build.log"
K=/tmp/kgcuda/katago
$K version || { echo "no katago"; exit 1; }
strip -o /tmp/katago.stripped /tmp/kgcuda/katago.bin && gzip -c /tmp/katago.stripped > "$OUT/katago-cuda-sm90.gz"; ls -la "$OUT"
python3 .device/run1.py "$K" "$D/b10c384h6nbttflrs.bin.gz" /tmp/nets/synthetic-b40c768nbt.bin /tmp/nets/synthetic-b18c384nbt.bin $((560 - (SECONDS - START)))
echo "done at $((SECONDS - START)) s"
