"""A GPU profile fitted to measured points: the model's figures for each point, the fit, and how good it is.

The model is the simulated engine's own (``kgserve.sim.model.throughput``): a benchmark point is what
``python -m kgserve.sim benchmark`` would print for that thread count (``benchmark_figures``), a load point is
``predict_throughput`` at its visits and concurrency. The fitted constants are the GPU model's batch costs (device
``d0``, ``d1``, ``d2``; serving thread ``h0``, ``h1``), the threads' wait in server cycles (``wait_cycles``),
tree work per visit (``c_visit``), the per-query overhead (``q0``), wasted evaluations of extra search threads
(``waste``) and the oversubscription cost (``oversub``); least squares on the log errors (Nelder-Mead from a few
seeded starts, in log space so that every constant stays positive). Fixed from the data without fitting: the NN
cache's in-search hit share (1 - the fewest NN rows per visit a benchmark point saw) and the memory terms (a linear
fit of the peak device memory to server threads and batch size, with a batch-squared term where a linear one does not
fit: a transformer's CUDA graphs, ``fit_memory``). ``batch_exponent`` stays the base profile's (1:
a batch's device time linear in its rows, so the device's rate never passes 1 / d1).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from benchmarks.calibration.gpu_data import BenchPoint, LoadPoint, Measurements, MemoryPoint
from benchmarks.calibration.table import spearman
from kgserve.sim.model.profiles import DeviceProfile
from kgserve.sim.model.throughput import SimParams, benchmark_figures, predict_throughput, steady_state

__all__ = [
    "FITTED",
    "Quality",
    "Scored",
    "fit",
    "fit_memory",
    "hit_share",
    "nelder_mead",
    "quality",
    "round_profile",
    "score",
]

FITTED = ("d0", "d1", "d2", "h0", "h1", "wait_cycles", "c_visit", "q0", "waste", "oversub")
_FLOOR = 1e-9  # a constant the fit drives to zero ends here (exp of a very negative number)
# weights of the squared log errors: the headline figure of each point counts most; visits/s (bench) carries
# the wasted evaluations; the NN batch carries the threads' wait (it is measured over the whole run)
_W_EVALS, _W_VISITS, _W_BATCH, _W_LOAD = 1.0, 0.5, 0.25, 2.0


@dataclass(frozen=True)
class Scored:
    label: str
    kind: str  # "bench" (headline: NN evals/s) or "load" (headline: req/s)
    measured: float
    model: float
    measured_visits: float  # visits/s (load: req/s x visits)
    model_visits: float
    measured_batch: float  # 0: not measured
    model_batch: float

    @property
    def error(self) -> float:
        return self.model / self.measured - 1.0

    @property
    def batch_error(self) -> float | None:
        return self.model_batch / self.measured_batch - 1.0 if self.measured_batch > 0 else None


def _bench(dev: DeviceProfile, pt: BenchPoint) -> Scored:
    p = SimParams(1, pt.threads, pt.max_batch, pt.server_threads, 20, max_visits=pt.visits, profile=dev)
    fig = benchmark_figures(p, pt.visits)
    return Scored(
        pt.label, "bench", pt.evals_per_s, fig.evals_per_s, pt.visits_per_s, fig.visits_per_s, pt.batch, fig.batch
    )


def _load(dev: DeviceProfile, pt: LoadPoint) -> Scored:
    rps = predict_throughput(pt.cfg(), pt.visits, pt.concurrency, profile=dev)
    active = min(pt.concurrency, pt.analysis_threads)
    batch = steady_state(SimParams.from_cfg(pt.cfg(), dev), active, pt.visits).batch if rps > 0 else 0.0
    return Scored(pt.label, "load", pt.req_per_s, rps, pt.req_per_s * pt.visits, rps * pt.visits, pt.batch, batch)


def score(dev: DeviceProfile, data: Measurements) -> list[Scored]:
    return [_bench(dev, pt) for pt in data.bench] + [_load(dev, pt) for pt in data.loads]


def _log_error(model: float, measured: float) -> float:
    return math.log(max(model, 1e-9) / measured)


def _loss(dev: DeviceProfile, data: Measurements, c_visit_cap: float) -> float:
    total = 0.0
    for row in score(dev, data):
        weight = _W_EVALS if row.kind == "bench" else _W_LOAD
        total += weight * _log_error(row.model, row.measured) ** 2
        if row.kind == "bench":
            total += _W_VISITS * _log_error(row.model_visits, row.measured_visits) ** 2
        if row.measured_batch > 0:
            total += _W_BATCH * _log_error(row.model_batch, row.measured_batch) ** 2
    if dev.c_visit > c_visit_cap:  # tree work cannot cost more CPU than the whole engine used
        total += 10.0 * math.log(dev.c_visit / c_visit_cap) ** 2
    return total


def nelder_mead(f: Callable[[np.ndarray], float], x0: np.ndarray, step: float, iters: int) -> tuple[np.ndarray, float]:
    """Minimise f from x0 (the textbook simplex: reflect, expand, contract, shrink)."""
    n = len(x0)
    simplex = [x0.astype(float)] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if values[-1] - values[0] < 1e-12:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2.0 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    best = int(np.argmin(values))
    return simplex[best], values[best]


def _to_x(dev: DeviceProfile, names: Sequence[str]) -> np.ndarray:
    # wait_cycles >= 1: a thread waits at least for its own batch
    raw = [getattr(dev, k) - (1.0 if k == "wait_cycles" else 0.0) for k in names]
    return np.log(np.maximum(np.array(raw, dtype=float), _FLOOR))


def _with(dev: DeviceProfile, values: Mapping[str, float]) -> DeviceProfile:
    """The profile with some of its float constants changed."""
    changes: dict[str, Any] = dict(values)
    return replace(dev, **changes)


def _from_x(base: DeviceProfile, names: Sequence[str], x: np.ndarray) -> DeviceProfile:
    return _with(base, {k: math.exp(v) + (1.0 if k == "wait_cycles" else 0.0) for k, v in zip(names, x, strict=True)})


def hit_share(bench: Sequence[BenchPoint], default: float) -> float:
    """The NN cache's in-search hit share: a search's rows per visit below 1 are hits. KataGo's graph search
    shares transpositions in the tree, so a fresh search's rows equal its visits (run 1: exactly, at 32 and 64
    threads); extra threads only add rows."""
    ratios = [pt.evals_per_s / pt.visits_per_s for pt in bench if pt.visits_per_s > 0]
    return min(0.5, max(0.0, 1.0 - min(ratios))) if ratios else default


def fit_memory(points: Sequence[MemoryPoint]) -> tuple[float, float, float, float] | None:
    """(base_gb, weights_gb, row_gb, row2_gb): peak = base + servers x (weights + batch x row + batch^2 x row2),
    least squares. Linear in the batch first (row2 = 0: a convnet's buffers); when that needs a negative term and
    four batch sizes or server counts tell them apart, with the square (a transformer's CUDA graphs, one per batch
    size). None when the points do not tell the terms apart."""
    y = np.array([p.peak_gib for p in points])
    for square in (False, True):
        if len({(p.server_threads, p.max_batch) for p in points}) < (4 if square else 3):
            return None
        a = np.array(
            [
                [1.0, p.server_threads, p.server_threads * p.max_batch]
                + ([p.server_threads * p.max_batch**2] if square else [])
                for p in points
            ]
        )
        terms = [float(t) for t in np.linalg.lstsq(a, y, rcond=None)[0]]
        if min(terms) >= 0:
            return (terms[0], terms[1], terms[2], terms[3] if square else 0.0)
    return None


def _c_visit_cap(loads: Sequence[LoadPoint]) -> float:
    caps = [pt.cores / (pt.req_per_s * pt.visits) for pt in loads if pt.cores > 0 and pt.req_per_s > 0]
    return min(caps) if caps else math.inf


def fit(
    base: DeviceProfile,
    data: Measurements,
    *,
    fixed: Mapping[str, float] | None = None,
    restarts: int = 4,
    iters: int = 3000,
    seed: int = 0,
) -> DeviceProfile:
    """The base profile with FITTED (less those `fixed` at a value), search_hit and (when the data tell them) the
    memory terms fitted."""
    if not data.bench and not data.loads:
        raise ValueError("no measured points to fit")
    fixed = dict(fixed or {})
    unknown = sorted(set(fixed) - set(FITTED))
    if unknown:
        raise ValueError(f"only fitted constants can be fixed ({', '.join(FITTED)}), not {', '.join(unknown)}")
    names = [k for k in FITTED if k not in fixed]
    start = _with(base, {**fixed, "search_hit": hit_share(data.bench, base.search_hit)})
    memory = fit_memory(data.memory)
    if memory is not None:
        start = replace(start, base_gb=memory[0], weights_gb=memory[1], row_gb=memory[2], row2_gb=memory[3])
    cap = _c_visit_cap(data.loads)
    rng = random.Random(seed)
    best_x, best_value = _to_x(start, names), math.inf
    for attempt in range(restarts):
        x0 = best_x if attempt == 0 else best_x + np.array([rng.gauss(0.0, 1.0) for _ in names])
        x, value = nelder_mead(lambda x: _loss(_from_x(start, names, x), data, cap), x0, step=0.7, iters=iters)
        if value < best_value:
            best_x, best_value = x, value
    return _from_x(start, names, best_x)


def round_profile(dev: DeviceProfile, digits: int = 3) -> DeviceProfile:
    """Fitted constants to `digits` significant digits (what a profile in profiles.py is written with); a constant
    the fit drove to its floor becomes 0."""

    def sig(v: float) -> float:
        return 0.0 if abs(v) < 1e-8 else float(f"{v:.{digits}g}")

    names = (*FITTED, "search_hit", "base_gb", "weights_gb", "row_gb", "row2_gb")
    return _with(dev, {k: sig(getattr(dev, k)) for k in names})


@dataclass(frozen=True)
class Quality:
    spearman_visits: float  # every point, visits/s (the one unit benchmark and load points share)
    spearman_bench: float | None  # benchmark points, NN evals/s
    spearman_load: float | None  # load points, req/s
    worst: Scored  # the largest headline error
    worst_batch: Scored | None


def _rho(rows: Sequence[Scored]) -> float | None:
    return spearman([r.measured for r in rows], [r.model for r in rows]) if len(rows) >= 3 else None


def quality(rows: Sequence[Scored]) -> Quality:
    with_batch = [r for r in rows if r.batch_error is not None]
    return Quality(
        spearman_visits=spearman([r.measured_visits for r in rows], [r.model_visits for r in rows]),
        spearman_bench=_rho([r for r in rows if r.kind == "bench"]),
        spearman_load=_rho([r for r in rows if r.kind == "load"]),
        worst=max(rows, key=lambda r: abs(r.error)),
        worst_batch=max(with_batch, key=lambda r: abs(r.batch_error or 0.0)) if with_batch else None,
    )
