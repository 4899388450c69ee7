"""Benchmark scripts (loopback only, bounded in time): ``python -m kgbench.bench.soak`` and
``python -m kgbench.bench.serving`` (simulated engine), ``python -m kgbench.bench.calibration`` (the sim's cpu
profile against a real KataGo named by KGBENCH_KATAGO_BIN / KGBENCH_KATAGO_MODEL)."""
