"""Load generator: closed-loop levels or open-loop Poisson arrivals against kgserve (HTTP) or an EnginePool (direct).

One level = warmup (recorded, excluded), then measurement windows until the last ``min_windows`` windows agree
within ``tolerance`` (or ``max_windows``: unstable), then a bounded drain. A request belongs to the window in which
it completed. While measuring, the generator watches its own event-loop lag and CPU (see ``kgbench.load.latency``).
"""

from __future__ import annotations

import asyncio
import random
import time
from contextlib import suppress
from typing import Any, Literal

import aiohttp
import psutil

from kgbench.load.kinds import Client, Traffic
from kgbench.load.ladder import next_level, planned_levels
from kgbench.load.latency import (
    merge_repeats,
    merge_selfwatch,
    selfwatch_summary,
    selfwatch_verdict,
    summarise_level,
    windows_agree,
)
from kgbench.load.responses import Outcome
from kgbench.load.senders import DirectSender, HttpSender, Sender
from kgbench.load.traffic import QuerySource
from kgbench.load.turnfigures import TurnEvent, merge_turn_figures, turn_figures
from kgbench.load.types import (
    DirectTarget,
    HttpTarget,
    LevelHook,
    LevelSummary,
    LoadResult,
    LoadSettings,
    Progress,
    ProgressUpdate,
    RequestRecord,
    SelfWatch,
)
from kgserve.engine.client import EngineClient

Target = str | HttpTarget | DirectTarget | Any  # Any: a started kgserve.engine.pool.EnginePool

__all__ = [
    "DirectTarget",
    "HttpTarget",
    "LevelHook",
    "LevelSummary",
    "LoadResult",
    "LoadSettings",
    "Progress",
    "ProgressUpdate",
    "QuerySource",
    "RequestRecord",
    "Target",
    "Traffic",
    "run_direct",
    "run_load",
]

DRAIN_S = 5.0  # at most this long to let in-flight requests finish after a level (then they are cancelled)
LAG_PROBE_S = 0.05


class _Level:
    """Bookkeeping of one level: raw results, window counters, self-watch samples."""

    def __init__(self, t0: float, load: LoadSettings, concurrency: int, repeat: int = 0) -> None:
        self.t0 = t0
        self.repeat = repeat
        self.load = load
        self.concurrency = concurrency
        self.raw: list[tuple[float, float, Outcome, str, str]] = []  # (send_s, done_s, outcome, position, kind)
        self.measure_start: float | None = None  # run-relative seconds
        self.window_ok: list[int] = []
        self.turns: list[TurnEvent] = []  # every analysed turn answered, as its final line arrived
        self.window_turns: list[int] = []
        self.errors = 0
        self.lags: list[float] = []
        self.inflight = 0

    def now(self) -> float:
        return time.monotonic() - self.t0

    def turn_done(self, visits: int, kind: str) -> None:
        done_s = self.now()
        self.turns.append(TurnEvent(done_s, visits, kind))
        if self.measure_start is not None and done_s >= self.measure_start:
            w = int((done_s - self.measure_start) / self.load.window_s)
            while len(self.window_turns) <= w:
                self.window_turns.append(0)
            self.window_turns[w] += 1

    def completed(self) -> int:
        """What the warmup waits for: answered turns when the traffic counts turns, else requests."""
        return len(self.turns) if self.load.counts_turns else len(self.raw)

    def window_count(self, w: int) -> int:
        counts = self.window_turns if self.load.counts_turns else self.window_ok
        return counts[w] if w < len(counts) else 0

    def done(self, send_s: float, outcome: Outcome, position: str, kind: str = "distinct") -> None:
        done_s = self.now()
        self.raw.append((send_s, done_s, outcome, position, kind))
        if self.measure_start is not None and done_s >= self.measure_start:
            w = int((done_s - self.measure_start) / self.load.window_s)
            if outcome.error is None:
                while len(self.window_ok) <= w:
                    self.window_ok.append(0)
                self.window_ok[w] += 1
            else:
                self.errors += 1

    def records(self, windows: int) -> list[RequestRecord]:
        out = []
        ms = self.measure_start if self.measure_start is not None else float("inf")
        for send_s, done_s, o, pos, kind in self.raw:
            w = int((done_s - ms) / self.load.window_s) if done_s >= ms else -1
            phase: Literal["warmup", "measure", "drain"] = (
                "warmup" if w < 0 else ("measure" if w < windows else "drain")
            )
            out.append(
                RequestRecord(
                    level=self.concurrency,
                    phase=phase,
                    window=w if phase == "measure" else -1,
                    send_s=round(send_s, 6),
                    latency_ms=round((done_s - send_s) * 1000.0, 3),
                    status=o.status,
                    bytes=o.nbytes,
                    visits=o.visits,
                    error=o.error,
                    position=pos,
                    repeat=self.repeat,
                    turns=o.turns,
                    kind=kind,
                    partials=o.partials,
                )
            )
        return out


async def _issue(sender: Sender, client: Client, level: _Level, counter: list[int], send_s: float) -> None:
    """Send one request. The caller has already counted it in ``level.inflight``: counted at dispatch, the open
    loop's cap holds even when it creates several tasks (running late) before any of them first runs."""
    key, body = client.next()
    body.update(level.load.query_fields)
    if level.load.max_visits is not None:  # null: the query carries none, the cfg's maxVisits applies
        body["maxVisits"] = level.load.max_visits
    counter[0] += 1
    kind = client.kind
    try:
        outcome = await sender.send(f"kgb{counter[0]}", body, lambda visits: level.turn_done(visits, kind))
    except Exception as exc:  # a sender bug must not silently kill a closed-loop worker
        outcome = Outcome(0, 0, None, "client_exception:" + type(exc).__name__)
    finally:
        level.inflight -= 1
    level.done(send_s, outcome, key, kind)


async def _closed_worker(
    sender: Sender, client: Client, level: _Level, counter: list[int], stop: asyncio.Event
) -> None:
    """One client: its next request once the previous one is answered (an interactive player: one in flight)."""
    while not stop.is_set():
        level.inflight += 1
        await _issue(sender, client, level, counter, level.now())
        # a request that fails without suspending (the session closed under it: the run is being torn down) would
        # make this loop spin without ever yielding, and a cancellation (Ctrl-C, SIGTERM) would never be delivered
        await asyncio.sleep(0)


async def _open_arrivals(
    sender: Sender,
    queries: Client,
    level: _Level,
    counter: list[int],
    stop: asyncio.Event,
    tasks: set[asyncio.Task[None]],
) -> None:
    rng = random.Random(level.load.seed + 7919 * level.concurrency)
    intended = level.now()
    while not stop.is_set():
        intended += rng.expovariate(level.load.rate)
        delay = intended - level.now()
        if delay > 0:
            await asyncio.sleep(delay)
        if stop.is_set():
            break
        if level.inflight >= level.concurrency:
            key, _ = queries.next()
            level.done(intended, Outcome(0, 0, None, "overload"), key, queries.kind)
            continue
        level.inflight += 1
        task = asyncio.create_task(_issue(sender, queries, level, counter, intended))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


async def _lag_probe(level: _Level, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        start = loop.time()
        await asyncio.sleep(LAG_PROBE_S)
        if level.measure_start is not None:
            level.lags.append((loop.time() - start - LAG_PROBE_S) * 1000.0)


async def _run_level(
    sender: Sender,
    load: LoadSettings,
    queries: Traffic,
    concurrency: int,
    index: int,
    t0: float,
    counter: list[int],
    progress: Progress | None,
    repeat: int = 0,
) -> tuple[LevelSummary, list[RequestRecord], SelfWatch, list[TurnEvent]]:
    level = _Level(t0, load, concurrency, repeat)
    stop = asyncio.Event()
    tasks: set[asyncio.Task[None]] = set()
    if load.mode == "closed":
        for i in range(concurrency):
            client = queries.client(i, concurrency)
            tasks.add(asyncio.create_task(_closed_worker(sender, client, level, counter, stop)))
    else:
        client = queries.client(0, 1)
        tasks.add(asyncio.create_task(_open_arrivals(sender, client, level, counter, stop, tasks)))
    probe = asyncio.create_task(_lag_probe(level, stop))
    try:
        return await _measure_level(level, load, concurrency, index, progress, stop, tasks, probe)
    finally:
        # on any way out (a cancellation: Ctrl-C, SIGTERM; an error) no worker outlives its level: left running,
        # they would keep sending into a closed session while the run is torn down
        stop.set()
        for task in (*tasks, probe):
            task.cancel()
        await asyncio.gather(*tasks, probe, return_exceptions=True)


async def _measure_level(
    level: _Level,
    load: LoadSettings,
    concurrency: int,
    index: int,
    progress: Progress | None,
    stop: asyncio.Event,
    tasks: set[asyncio.Task[None]],
    probe: asyncio.Task[None],
) -> tuple[LevelSummary, list[RequestRecord], SelfWatch, list[TurnEvent]]:
    def report(phase: Any, window: int, rate: float) -> None:
        if progress is not None:
            unit = "turns/s" if load.counts_turns else "req/s"
            progress(ProgressUpdate(concurrency, index, planned_levels(load), phase, window, rate, level.errors, unit))

    level_start = level.now()
    # warmup: warmup_s, and at least until one round of requests (min(concurrency, 8)) came back (traffic counting
    # turns: that many turns)
    first_round = min(concurrency, 8)
    while (elapsed := level.now() - level_start) < load.warmup_s or (
        level.completed() < first_round and elapsed < load.warmup_s + load.request_timeout_s
    ):
        await asyncio.sleep(min(0.5, max(0.05, load.warmup_s - elapsed)))
        done = sum(1 for r in level.raw if r[2].error is None)
        report("warmup", -1, done / max(1e-9, level.now() - level_start))
    level.measure_start = level.now()
    cpu0, wall0 = _cpu_seconds(), time.monotonic()
    rates: list[float] = []
    stable = False
    while len(rates) < load.max_windows:
        end = level.measure_start + (len(rates) + 1) * load.window_s
        while (left := end - level.now()) > 0:
            await asyncio.sleep(min(0.5, left))
            w = len(rates)
            partial = level.window_count(w)
            report("measure", w, partial / max(1e-9, load.window_s - max(0.0, end - level.now())))
        w = len(rates)
        rates.append(level.window_count(w) / load.window_s)
        report("measure", w, rates[-1])
        if len(rates) >= load.min_windows and windows_agree(rates, load.min_windows, load.tolerance):
            stable = True
            break
    watch = selfwatch_summary(level.lags, _cpu_seconds() - cpu0, time.monotonic() - wall0)
    stop.set()
    report("drain", -1, rates[-1] if rates else 0.0)
    await _drain(tasks, probe)
    records = level.records(len(rates))
    request_rates = [(level.window_ok[w] if w < len(level.window_ok) else 0) / load.window_s for w in range(len(rates))]
    summary = summarise_level(
        records,
        concurrency=concurrency,
        offered_rate=load.rate if load.mode == "open" else None,
        duration_s=len(rates) * load.window_s,
        window_req_per_s=request_rates,
        stable=stable,
        slo_ms=load.slo_ms,
        measure_start_s=level.measure_start,
    )
    summary = turn_figures(summary, records, level.turns, level.window_turns, load.counts_turns)
    report("done", -1, summary.rate(load.counts_turns)[0])
    return summary, records, watch, level.turns


async def _drain(tasks: set[asyncio.Task[None]], probe: asyncio.Task[None]) -> None:
    pending = set(tasks)
    if pending:
        _, pending = await asyncio.wait(pending, timeout=DRAIN_S)
    for task in (*pending, probe):
        task.cancel()
    for task in (*pending, probe):
        with suppress(asyncio.CancelledError):
            await task


def _cpu_seconds() -> float:
    t = psutil.Process().cpu_times()
    return float(t.user + t.system)


async def run_levels(
    sender: Sender,
    transport: Any,
    load: LoadSettings,
    queries: Traffic,
    progress: Progress | None,
    on_level: LevelHook | None = None,
) -> LoadResult:
    """Run the levels of the ladder (kgbench.load.ladder), each ``load.repeats`` times, with an already built
    sender (used by run_load and the direct transport). ``on_level`` may stop the run after any level."""
    t0 = time.monotonic()
    counter = [0]
    levels: list[LevelSummary] = []
    records: list[RequestRecord] = []
    watches: list[SelfWatch] = []
    turns: list[TurnEvent] = []
    sent_before, repeats_before = queries.sent, queries.repeats
    stop_reason: str | None = None
    while (step := next_level(load, levels)).concurrency is not None:
        summaries, level_records = [], []
        for repeat in range(load.repeats):
            summary, recs, watch, answered = await _run_level(
                sender, load, queries, step.concurrency, len(levels), t0, counter, progress, repeat
            )
            summaries.append(summary)
            level_records.extend(recs)
            watches.append(watch)
            turns.extend(answered)
        level = merge_repeats(summaries, level_records)
        levels.append(merge_turn_figures(level, summaries, level_records) if len(summaries) > 1 else level)
        records.extend(level_records)
        if on_level is not None and on_level(levels[-1]):
            stop_reason = f"stopped after concurrency {step.concurrency} by the sweep (pruned)"
            break
    else:
        stop_reason = step.reason
    merged = merge_selfwatch(watches)
    reason = selfwatch_verdict(merged, load.max_loop_lag_ms, load.max_cpu_share) if merged else None
    sent = queries.sent - sent_before
    return LoadResult(
        transport=transport,
        mode=load.mode,
        levels=levels,
        records=records,
        position_repeat_rate=(queries.repeats - repeats_before) / sent if sent else 0.0,
        unstable=any(not lv.stable for lv in levels),
        invalid=reason is not None,
        invalid_reason=reason,
        selfwatch=merged,
        stop_reason=stop_reason,
        started_at=t0,
        traffic=queries.kind,
        turns_total=len(turns),
        visits_total=sum(t.visits for t in turns),
    )


async def run_load(
    target: Target,
    load: LoadSettings,
    queries: Traffic,
    progress: Progress | None = None,
    on_level: LevelHook | None = None,
) -> LoadResult:
    """Run every level of ``load`` against ``target``: a str (HTTP base URL), HttpTarget, DirectTarget, or a
    started EnginePool itself (anything with ``submit``)."""
    if not isinstance(target, str | HttpTarget | DirectTarget) and hasattr(target, "submit"):
        target = DirectTarget(target)
    if isinstance(target, DirectTarget):
        return await run_direct(target.pool, load, queries, progress, on_level)
    http = HttpTarget(target) if isinstance(target, str) else target
    limit = load.highest_level + 8
    connector = aiohttp.TCPConnector(limit=limit, limit_per_host=limit, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        return await run_levels(
            HttpSender(session, http, load.request_timeout_s), "http", load, queries, progress, on_level
        )


async def run_direct(
    pool: EngineClient,
    load: LoadSettings,
    queries: Traffic,
    progress: Progress | None = None,
    on_level: LevelHook | None = None,
) -> LoadResult:
    """Same as ``run_load(DirectTarget(pool), ...)``: every level straight into a started EnginePool."""
    sender = DirectSender(pool, load.request_timeout_s)
    return await run_levels(sender, "direct", load, queries, progress, on_level)


def run_load_sync(target: Target, load: LoadSettings, queries: Traffic, progress: Progress | None = None) -> LoadResult:
    """Blocking wrapper (``asyncio.run``) for callers outside an event loop."""
    return asyncio.run(run_load(target, load, queries, progress))
