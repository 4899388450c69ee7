"""Benchmark scripts (loopback only, simulated engine, bounded in time): ``python -m kgbench.bench.soak`` and
``python -m kgbench.bench.serving``."""
