"""Benchmark scripts (loopback only, bounded in time): ``python -m benchmarks.soak`` and
``python -m benchmarks.serving`` (simulated engine), ``python -m benchmarks.calibration`` (the sim's cpu
profile against a real KataGo named by KGBENCH_KATAGO_BIN / KGBENCH_KATAGO_MODEL)."""
