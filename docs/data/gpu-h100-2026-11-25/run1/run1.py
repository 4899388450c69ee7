"""Device run 1: KataGo CUDA on a Hopper GPU with the KaTrain net and synthetic b40c768nbt / b18c384nbt.
Everything goes to $OUT/results.jsonl (one JSON per measurement) and stdout."""
import json, os, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, os.getcwd())
from kgbench.enginebench.run import run_engine_benchmark, EngineBenchError
from kgbench.bench.engineload import run_engine_load_sync, nineteen_by_nineteen
from kgbench.track.gpu import GpuSampler
from kgserve.katago.cfg import cfg_text

OUT = Path(os.environ["OUT"]); RES = OUT / "results.jsonl"
K = sys.argv[1]; NETS = {"katrain": sys.argv[2], "b40": sys.argv[3], "b18": sys.argv[4]}
T0 = time.monotonic(); BUDGET = float(sys.argv[5])
def left(): return BUDGET - (time.monotonic() - T0)
def record(d):
    d["t"] = round(time.monotonic() - T0, 1)
    print(json.dumps(d), flush=True)
    with RES.open("a") as f: f.write(json.dumps(d) + "\n")

def bench(net, threads, visits, positions, server_threads=2, batch=256, fp16="auto"):
    keys = {"nnMaxBatchSize": batch, "numNNServerThreadsPerModel": server_threads, "nnCacheSizePowerOfTwo": 20,
            "nnMutexPoolSizePowerOfTwo": 16, "cudaUseFP16": fp16, "cudaUseNHWC": "auto", "logDir": "/tmp/kglogs"}
    with GpuSampler(interval_s=0.25) as gpu:
        try:
            run = run_engine_benchmark(argv_prefix=[K], cfg_keys=keys, model=NETS[net], visits=visits, threads=threads,
                positions=positions, workdir=f"/tmp/bench-{net}-{server_threads}-{batch}", timeout_s=max(30, left()-20), progress=None)
        except EngineBenchError as e:
            record({"kind": "benchmark", "net": net, "error": str(e), "raw": e.raw_text[-3000:]}); return
    rows = [{"threads": r.threads, **{k: v for k, v in r.__dict__.items() if k != "threads"}} for r in run.result.rows] if hasattr(run.result, "rows") else None
    info = [ln for ln in run.stderr.splitlines() + run.stdout.splitlines() if any(s in ln for s in ("FP16", "NHWC", "GPU", "Model name", "version", "cuDNN", "ecommended"))][:30]
    record({"kind": "benchmark", "net": net, "server_threads": server_threads, "batch": batch, "visits": visits, "positions": positions,
            "metrics": run.metrics(), "series": run.metric_series(), "gpu": gpu.metrics(), "info": info, "wall_s": run.wall_s})

def engine_load(net, analysis, search, batch, servers, visits, seconds_target, rate_guess, extra=None, cache=20):
    cfg = Path(f"/tmp/analysis-{net}-{analysis}x{search}-{batch}-{servers}.cfg")
    cfg.write_text(cfg_text({"numAnalysisThreads": analysis, "numSearchThreadsPerAnalysisThread": search, "nnMaxBatchSize": batch,
        "numNNServerThreadsPerModel": servers, "nnCacheSizePowerOfTwo": cache, "nnMutexPoolSizePowerOfTwo": 16, "logDir": "/tmp/kglogs",
        "reportAnalysisWinratesAs": "BLACK", "cudaUseFP16": "auto", "cudaUseNHWC": "auto"}, ["run1"]))
    concurrency = 2 * analysis
    queries = concurrency + int(rate_guess * seconds_target)
    t_start = time.monotonic()
    with GpuSampler(interval_s=0.25) as gpu:
        try:
            r = run_engine_load_sync([K, "analysis", "-config", str(cfg), "-model", NETS[net]], nineteen_by_nineteen(0),
                visits=visits, queries=queries, concurrency=concurrency, extra=extra, startup_timeout_s=120, run_timeout_s=max(30, left()-15))
        except Exception as e:
            record({"kind": "engineload", "net": net, "cfg": [analysis, search, batch, servers], "error": repr(e)}); return
    t_end = time.monotonic()
    # the measured span is the last measure_s seconds before the engine was stopped (~t_end - stop time)
    win_end = t_start + r.startup_s + (t_end - t_start - r.startup_s)  # approximate: energy over [end - measure_s - stop, end]
    record({"kind": "engineload", "net": net, "analysis": analysis, "search": search, "batch": batch, "servers": servers, "visits": visits,
            "extra": extra or {}, "result": {**r.__dict__, "cores": r.cores_used}, "gpu_all": gpu.metrics(),
            "gpu_measured": gpu.metrics(t_end - r.measure_s - 3, t_end - 3)})

plan = [
    lambda: bench("katrain", [16, 32, 64, 128, 256], 800, 10),
    lambda: bench("b40", [32, 64, 128, 256, 512], 400, 10),
    lambda: engine_load("b40", 32, 8, 256, 2, 100, 20, 15),
    lambda: engine_load("katrain", 64, 4, 256, 2, 100, 15, 80),
    lambda: bench("b40", [256], 400, 10, server_threads=1),
    lambda: bench("b40", [256], 400, 10, server_threads=4),
    lambda: engine_load("b40", 128, 2, 256, 2, 100, 20, 15),
    lambda: bench("b18", [64, 128, 256], 800, 10),
    lambda: engine_load("katrain", 16, 2, 32, 1, 1, 8, 1500, extra={"includePolicy": True, "includeOwnership": True}, cache=10),
    lambda: bench("b40", [256], 400, 10, batch=512, server_threads=2),
]
for i, step in enumerate(plan):
    if left() < 45:
        record({"kind": "skipped", "steps_left": len(plan) - i}); break
    step()
