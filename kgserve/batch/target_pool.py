"""The runtime's engines in this process as the batch command's target, when no kgserve serves them: the same
EnginePool, cfg, binary and network that `python -m kgserve --config PATH` would serve (runtime/config.yaml),
without the HTTP layer.

A query the pool cannot take now (no engine ready: one is restarting) or that an engine dropped (it died) is
tried again; the pool restarts engines with its own back-off. The engines' exit statistics (`NN rows`) give the
summary its NN rows per visit.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from kgserve.batch.answers import Answer, RetryLater, answer_of
from kgserve.batch.inputs import Row
from kgserve.batch.plan import Plan, TargetFailed
from kgserve.engine.errors import EngineError, NoEngineReady, failure_text
from kgserve.engine.pool import EnginePool
from kgserve.katago.cfg import cfg_analysis_threads
from kgserve.katago.protocol import Query, classify_line
from kgserve.preflight import startup_problems
from kgserve.settings import Settings

__all__ = ["PoolTarget"]

_NN_ROWS = re.compile(r"NN rows: (\d+(?:\.\d+)?)")
FALLBACK_THREADS = 8  # when the cfg's numAnalysisThreads cannot be read


class PoolTarget:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool = EnginePool(settings, stderr_sink=self._stderr)
        self._nn_rows: dict[str, float] = {}  # engine label -> its last `NN rows` report

    def describe(self) -> str:
        engine = self.settings.engine
        return f"{engine.processes} {engine.backend} engine(s), {engine.cfg.name}, {engine.model_for(None).name}"

    def _stderr(self, label: str, text: str) -> None:
        if (match := _NN_ROWS.search(text)) is not None:
            self._nn_rows[label] = float(match.group(1))

    async def open(self) -> None:
        if problems := startup_problems(self.settings):
            raise TargetFailed("cannot start the engines: " + "; ".join(problems))
        await self.pool.start()
        try:
            await self.pool.wait_ready(self.settings.engine.backend_settings().startup_timeout_s)
        except NoEngineReady as exc:
            await self.pool.close(0.0)
            raise TargetFailed(f"the engines did not become ready: {exc.reason}") from None

    async def plan(self, concurrency: int | None) -> Plan:
        """2 x numAnalysisThreads x engines unless given: every thread busy, and one query waiting for each."""
        if concurrency is not None:
            return Plan(concurrency, 1, "--concurrency")
        threads = cfg_analysis_threads(self.settings.engine.cfg)
        processes = self.settings.engine.processes
        if threads is None:
            return Plan(
                2 * FALLBACK_THREADS * processes, 1, f"the cfg names no numAnalysisThreads: 2 x {FALLBACK_THREADS}"
            )
        return Plan(2 * threads * processes, 1, f"2 x {threads} analysis threads x {processes} engine(s), from the cfg")

    async def _send(self, row: Row) -> Answer | RetryLater:
        assert row.line is not None
        query = classify_line(row.line)
        assert isinstance(query, Query), "rows KataGo would refuse are answered before they reach a target"
        try:
            lines = [line async for line in self.pool.submit(query)]
        except NoEngineReady as exc:
            return RetryLater(f"no engine ready: {exc.reason}")
        except EngineError as exc:
            return RetryLater(failure_text(exc))
        try:
            return answer_of(lines, row.finals)
        except RetryLater as exc:
            return exc

    async def send_group(self, rows: Sequence[Row]) -> list[Answer | RetryLater]:
        return list(await asyncio.gather(*(self._send(row) for row in rows)))

    async def close(self) -> float | None:
        await self.pool.close(self.settings.server.grace_period_s)
        return sum(self._nn_rows.values()) if self._nn_rows else None
