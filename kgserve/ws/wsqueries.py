"""One WebSocket connection's queries: admitted (kgserve.admission: the per-connection and per-client caps, the
server-wide bound, the memory budget, the interactive share), run on the engine client, their lines handed to the
connection's send buffer; terminated on request, when the connection ends, or when the server shuts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from kgserve.admission.budget import query_cost
from kgserve.admission.checks import CheckedQuery, check_query, search_visits
from kgserve.admission.clients import Client
from kgserve.admission.limits import Refusal, Ticket
from kgserve.admission.priority import PriorityClass, apply_classes, fairness_levels
from kgserve.auth import Credential
from kgserve.context import ServeContext
from kgserve.engine.errors import SHUTDOWN_TEXT, failure_text
from kgserve.katago.protocol import Query, Rejected, dump_compact, error_line
from kgserve.metrics import Metrics
from kgserve.ws.sendbuffer import SendBuffer

__all__ = ["SHUTDOWN_TEXT", "ConnectionQueries"]

DRAINING_TEXT = "kgserve is shutting down: it takes no new query"
log = logging.getLogger("kgserve.websocket")


@dataclass
class _Running:
    query: Query
    stream: Any
    ticket: Ticket
    task: asyncio.Task[None] | None = None


class ConnectionQueries:
    def __init__(
        self,
        ctx: ServeContext,
        metrics: Metrics,
        outbox: SendBuffer,
        client: Client,
        klass: PriorityClass,
        credential: Credential | None,
    ) -> None:
        self.ctx = ctx
        self.metrics = metrics
        self.outbox = outbox
        self.client = client
        self.klass = klass
        self.interactive_unbounded = credential is not None and credential.interactive
        settings = ctx.settings
        self.limits = settings.limits.model_copy(update={"visits_over_cap": "clamp"})
        self.max_inflight = settings.websocket.max_inflight_per_connection
        self.running: dict[int, _Running] = {}
        self.counts = {"messages": 0, "queries": 0, "rejected": 0, "refused": 0, "demoted": 0}
        self.accepting = True  # False once the server shuts down: new queries are refused
        self.idle = asyncio.Event()  # set whenever no query is running
        self.idle.set()
        self._next = 0

    # -- intake ------------------------------------------------------------------------------------------
    def reject(self, line: bytes) -> None:
        self.counts["rejected"] += 1
        self.metrics.websocket_query("rejected")
        self.outbox.put(line)

    def admit(self, query: Query, line_bytes: int) -> None:
        checked = check_query(query, self.limits, self.ctx.cfg_visits)
        if isinstance(checked, Rejected):
            self.reject(checked.error_line)
            return
        assert isinstance(checked, CheckedQuery)
        if checked.silent:
            return
        if checked.clamped:
            self.outbox.put(self._clamp_warning(query))
        interactive = self.klass == "interactive" and (
            self.interactive_unbounded or self.client.interactive < self.ctx.settings.priority.interactive_share
        )
        admitted = checked.query
        priority = self.ctx.settings.priority
        if priority.classes:
            klass: PriorityClass = "interactive" if interactive else "batch"
            # its level: the client's queries already in flight in its class (kgserve.admission.priority)
            in_flight = fairness_levels(self.client.inflight, self.client.interactive, enabled=priority.fairness)
            admitted = apply_classes([admitted], [klass], in_flight)[0]
        refusal = self._refusal(admitted, line_bytes, int(interactive))
        if refusal is not None:
            self.counts["refused"] += 1
            self.metrics.websocket_query("refused")
            self.outbox.put(error_line(refusal, caller_id=query.caller_id))
        elif self.klass == "interactive" and not interactive:  # runs, as batch: a refused query is not demoted
            self.counts["demoted"] += 1

    def _refusal(self, query: Query, line_bytes: int, interactive: int) -> str | None:
        """Admit and start the query; why it was refused (None: it runs)."""
        if not self.accepting:
            return DRAINING_TEXT
        if len(self.running) >= self.max_inflight:
            return (
                f"kgserve: over the limit of {self.max_inflight} queries in flight on this connection "
                "(websocket.max_inflight_per_connection); send it again when one has finished"
            )
        pool = self.ctx.pool
        if pool is None:
            return "kgserve: the engine pool is not running"
        ticket = self.ctx.admission.admit(self.client, 1, query_cost(line_bytes), interactive)
        if isinstance(ticket, Refusal):
            return ticket.message
        try:
            stream = pool.submit(query, self.client.key)
        except Exception as exc:
            self.ctx.admission.release(ticket)
            return f"engine unavailable: kgserve could not submit this query ({exc})"
        if self.client.partial_rate and hasattr(stream, "partial_gate"):
            stream.partial_gate = self.client.take_partial
        self._start(query, stream, ticket)
        return None

    def _clamp_warning(self, query: Query) -> bytes:
        cap = self.limits.max_visits
        asked = search_visits(query, self.ctx.cfg_visits)
        message = f"kgserve: maxVisits {asked} is over the cap of {cap} (limits.max_visits)"
        message += f"; searching {cap} visits"
        # KataGo's warning shape, plus isDuringSearch/noResults: a client that dispatches on isDuringSearch
        # (KaTrain) would otherwise take the warning for the query's final result and stop waiting for it
        line = {"field": "maxVisits", "id": query.caller_id, "isDuringSearch": True, "noResults": True}
        return dump_compact({**line, "warning": message}).encode("utf-8")

    # -- engine side -------------------------------------------------------------------------------------
    def _start(self, query: Query, stream: Any, ticket: Ticket) -> None:
        key = self._next
        self._next += 1
        running = self.running[key] = _Running(query, stream, ticket)
        self.idle.clear()
        self.counts["queries"] += 1
        running.task = asyncio.create_task(self._pump(key, running))

    async def _pump(self, key: int, running: _Running) -> None:
        outcome = "ok"
        try:
            async for line in running.stream:
                self.outbox.put(bytes(line).rstrip(b"\r\n"))
        except asyncio.CancelledError:
            outcome = "terminated"
            raise
        except Exception as exc:
            outcome = "engine_died"
            self.outbox.put(error_line(failure_text(exc), caller_id=running.query.caller_id))
        finally:
            self.running.pop(key, None)
            if not self.running:
                self.idle.set()
            self.ctx.admission.release(running.ticket)
            self.metrics.websocket_query(outcome)

    def abort_all(self, caller_id: str | None, turns: frozenset[int] | None = None) -> None:
        pool = self.ctx.pool
        if pool is None:
            return
        for running in list(self.running.values()):
            if caller_id is None or running.query.caller_id == caller_id:
                with contextlib.suppress(Exception):  # an engine that is gone has nothing left to terminate
                    if turns is None:
                        pool.abort(running.stream)
                    else:
                        pool.abort(running.stream, turns)

    def cut_short(self, text: str) -> None:
        """Every query still running ends now: terminated on the engine, an error line `text` each."""
        for running in list(self.running.values()):
            self.outbox.put(error_line(text, caller_id=running.query.caller_id))
        self.abort_all(None)
        self.outbox.closed = True  # what the engine answers to the terminates is not sent

    async def cancel_all(self) -> None:
        """The connection is over: every query still running is terminated, its task ended."""
        self.abort_all(None)
        tasks = [running.task for running in self.running.values() if running.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
