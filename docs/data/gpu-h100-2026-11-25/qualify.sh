#!/bin/bash
# device: qualify with NET (a model file or synthetic:ARCH) in BUDGET; results packed into $OUT
NET="$1"; BUDGET="$2"; NAME="$3"
set -u
export PYTHONUNBUFFERED=1
START=$SECONDS
exec > >(tee "$OUT/$NAME.log") 2>&1
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/.device/stub
CUDNN=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])')/lib
mkdir -p /tmp/kgcuda && gunzip -c .device/katago-cuda-sm90.gz > /tmp/kgcuda/katago.bin && chmod +x /tmp/kgcuda/katago.bin
printf '#!/bin/bash\nexport LD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexec /tmp/kgcuda/katago.bin "$@"\n' "$CUDNN" > /tmp/kgcuda/katago && chmod +x /tmp/kgcuda/katago
/tmp/kgcuda/katago version | head -3
echo "setup done at $((SECONDS - START)) s"
python3 -m kgbench.qualify --binary /tmp/kgcuda/katago --backend cuda --net "$NET" --budget "$BUDGET" --out /tmp/q
echo "qualify exit $? at $((SECONDS - START)) s"
cp /tmp/q/report.md "$OUT/$NAME-report.md"; cp /tmp/q/results.json "$OUT/$NAME-results.json"
tar czf "$OUT/$NAME-folder.tgz" -C /tmp --exclude='q/nets' --exclude='*.bin' q
ls -la "$OUT"
