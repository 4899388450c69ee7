"""Was a job measured beside other work? Judged per measurement window, over every level of the job.

A window is **contended** when
- the host's cores were saturated (busy >= ``busy_pct``, 90% by default) and processes outside the job's own tree
  (kgserve, its engines, the load generator: kgbench.track.sampling.host) used >= ``other_cpu_cores`` (by default
  the larger of 0.25 cores and 5% of the host's cores); CPU steal is part of that figure (the hypervisor gave the
  job's cores to another guest), and is shown beside it; or
- another process held the job's accelerator: an NVML compute process on its GPU that is not the job's, or another
  sim on its simulated device (kgbench.track.sampling.devprocs).

Windows shorter than ``MIN_SPAN_S`` are judged together with the next ones of their level (the host sampler reads
its counters every 0.5 s: one short window's figure is mostly sampling error). A job with any contended window is
flagged; the figures of its worst window and the count of contended windows decide and are recorded. The defaults
and the figures that chose them: docs/sweeps.md, "Contention".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kgbench.load.types import LoadResult
from kgbench.track.sampling.devprocs import DeviceProcessSampler, DeviceSource
from kgbench.track.sampling.host import HostSampler

__all__ = [
    "BUSY_PCT",
    "MIN_OTHER_CORES",
    "MIN_SPAN_S",
    "OTHER_CORES_SHARE",
    "Contention",
    "ContentionSettings",
    "WindowFigures",
    "judge",
    "measure_windows",
    "wait_for_quiet",
    "window_figures",
]

MIN_OTHER_CORES = 0.25  # outside CPU a window may carry unflagged, at least ...
OTHER_CORES_SHARE = 0.05  # ... or this share of the host's cores, whichever is larger
BUSY_PCT = 90.0  # ... while the host's cores are this busy (below it the job had idle cores to take)
MIN_SPAN_S = 2.0  # shorter windows are judged together with the next ones of their level


@dataclass(frozen=True)
class ContentionSettings:
    """The `contention` section of a job's config (conf/config.yaml)."""

    check: bool = True  # off: the figures are logged, no job is flagged (a test suite on a shared machine)
    other_cpu_cores: float | None = None  # None: max(MIN_OTHER_CORES, OTHER_CORES_SHARE x the host's cores)
    busy_pct: float = BUSY_PCT
    device_processes: bool = True
    remeasure: int = 1  # re-measures of a flagged job; still flagged: kept, marked
    settle_s: float = 60.0  # before a re-measure, wait up to this long for the host to quiet down

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> ContentionSettings:
        names = {"check", "other_cpu_cores", "busy_pct", "device_processes", "remeasure", "settle_s"}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown contention setting(s) {unknown}; valid: {sorted(names)}")
        out = cls(
            check=_truth(values.get("check", True)),
            other_cpu_cores=None if values.get("other_cpu_cores") is None else float(values["other_cpu_cores"]),
            busy_pct=float(values.get("busy_pct", BUSY_PCT)),
            device_processes=_truth(values.get("device_processes", True)),
            remeasure=int(values.get("remeasure", 1)),
            settle_s=float(values.get("settle_s", 60.0)),
        )
        if out.remeasure < 0 or out.settle_s < 0:
            raise ValueError("contention.remeasure and contention.settle_s must be >= 0")
        return out

    def other_cores_limit(self, cores: float) -> float:
        if self.other_cpu_cores is not None:
            return self.other_cpu_cores
        return max(MIN_OTHER_CORES, OTHER_CORES_SHARE * cores)


def _truth(value: object) -> bool:
    return str(value).strip().lower() in ("true", "1", "on", "yes")


@dataclass(frozen=True)
class WindowFigures:
    """What the machine did in one judged span of a level's measurement windows."""

    level: int
    first_window: int  # index of its first window in the level (repeats counted on)
    windows: int  # windows judged together
    start: float  # time.monotonic()
    end: float
    other_cpu_cores: float | None  # CPU of processes outside the job's tree, steal included
    steal_pct: float | None
    busy_pct: float | None
    cores: float
    device_others: tuple[int, ...] | None  # other jobs' pids on the device (0: unnamed), None: not sampled

    def label(self) -> str:
        last = self.first_window + self.windows - 1
        which = f"window {self.first_window + 1}" + (f"-{last + 1}" if last > self.first_window else "")
        return f"level {self.level} {which}"


@dataclass(frozen=True)
class Contention:
    flagged: bool
    windows: tuple[WindowFigures, ...]  # every judged span
    contended: tuple[WindowFigures, ...]  # those over a threshold
    reason: str  # the figures that decided it ("" when not flagged)
    checked: bool = True  # False: contention.check off (figures only)

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {
            "contended_windows": float(len(self.contended)),
            "judged_windows": float(len(self.windows)),
        }
        for key, values in (
            ("contention_other_cpu_cores_max", [w.other_cpu_cores for w in self.windows]),
            ("contention_steal_pct_max", [w.steal_pct for w in self.windows]),
            ("contention_device_processes_max", [_count(w.device_others) for w in self.windows]),
        ):
            present = [v for v in values if v is not None and math.isfinite(v)]
            if present:
                out[key] = max(present)
        return out


def _count(pids: tuple[int, ...] | None) -> float | None:
    return None if pids is None else float(len(pids))


def measure_windows(result: LoadResult, window_s: float) -> list[tuple[int, int, int, float, float]]:
    """Every level's measurement windows as judged spans: (level, first window, windows, start, end) in
    time.monotonic(). Consecutive windows of one repeat are taken together until they last MIN_SPAN_S; a shorter
    remainder joins the span before it."""
    group = max(1, math.ceil(MIN_SPAN_S / window_s - 1e-9))
    out: list[tuple[int, int, int, float, float]] = []
    for level in result.levels:
        index = 0
        for span_start, span_end in level.measure_spans:
            start, end = result.started_at + span_start, result.started_at + span_end
            count = max(1, round((end - start) / window_s))
            firsts = list(range(0, count, group))
            if len(firsts) > 1 and count - firsts[-1] < group:
                firsts.pop()  # the remainder joins the span before it
            for k, first in enumerate(firsts):
                last = firsts[k + 1] if k + 1 < len(firsts) else count
                span_end_s = end if last == count else start + last * window_s
                out.append((level.concurrency, index + first, last - first, start + first * window_s, span_end_s))
            index += count
    return out


def _window_reasons(w: WindowFigures, settings: ContentionSettings) -> list[str]:
    reasons: list[str] = []
    limit = settings.other_cores_limit(w.cores)
    busy = w.busy_pct if w.busy_pct is not None else 0.0
    if w.other_cpu_cores is not None and w.other_cpu_cores >= limit and busy >= settings.busy_pct:
        steal = f", steal {w.steal_pct:.1f}%" if w.steal_pct else ""
        reasons.append(
            f"other processes used {w.other_cpu_cores:.2f} cores (>= {limit:.2f}) with the host "
            f"{busy:.0f}% busy (>= {settings.busy_pct:g}%){steal}"
        )
    if settings.device_processes and w.device_others:
        named = [str(p) for p in w.device_others if p]
        unnamed = len(w.device_others) - len(named)
        who = ", ".join(named + ([f"{unnamed} unnamed"] if unnamed else []))
        reasons.append(f"{len(w.device_others)} other process(es) on the job's device (pid {who})")
    return reasons


def judge(windows: list[WindowFigures], settings: ContentionSettings) -> Contention:
    """Flag the job when any window is contended (module docstring); the reason names the worst window's figures."""
    contended = [(w, r) for w in windows if (r := _window_reasons(w, settings))]
    if not contended:
        return Contention(False, tuple(windows), (), "", settings.check)
    worst, reasons = max(contended, key=lambda item: (len(item[0].device_others or ()), item[0].other_cpu_cores or 0))
    reason = f"{len(contended)} of {len(windows)} window(s) contended; worst {worst.label()}: {'; '.join(reasons)}"
    return Contention(settings.check, tuple(windows), tuple(w for w, _ in contended), reason, settings.check)


def window_figures(
    spans: list[tuple[int, int, int, float, float]],
    host: Callable[[float, float], Mapping[str, float]],
    device: Callable[[float, float], tuple[int, ...] | None],
    cores: float,
) -> list[WindowFigures]:
    out = []
    for level, first, n, start, end in spans:
        figures = host(start, end)
        out.append(
            WindowFigures(
                level, first, n, start, end,
                figures.get("other_cpu_cores"), figures.get("host_cpu_steal_pct"), figures.get("host_cpu_busy_pct"),
                cores, device(start, end),
            )
        )  # fmt: skip
    return out


def wait_for_quiet(
    settings: ContentionSettings,
    device: DeviceSource | None,
    note: Callable[[str], None],
    sample_s: float = 2.0,
) -> bool:
    """Before a re-measure: sample the host (this process is all of the job now) and the job's device until
    processes outside the job use less CPU than the threshold and none holds the device, or `settle_s` passed.
    True when it got quiet."""
    started = time.monotonic()
    while True:
        with HostSampler(interval_s=0.25) as host, DeviceProcessSampler(device, interval_s=0.25) as dev:
            time.sleep(sample_s)
        figures = host.metrics()
        other = figures.get("other_cpu_cores", 0.0)
        limit = settings.other_cores_limit(figures.get("host_cores", 1.0))
        holders = (dev.others() or ()) if settings.device_processes else ()
        waited = time.monotonic() - started
        # only the others' share, not the flagging test's "and the host saturated": the job is not running now, so
        # the host's busy share here leaves out what the re-measure itself will add
        if other < limit and not holders:
            if waited > sample_s:
                note(f"the host got quiet after {waited:.0f} s")
            return True
        if waited >= settings.settle_s:
            busy = f"other processes {other:.2f} cores" + (f", {len(holders)} on the device" if holders else "")
            note(f"still busy after {waited:.0f} s ({busy}): re-measuring anyway")
            return False
