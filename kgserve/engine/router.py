"""Which engine stdout line belongs to whom: internal ids, the pieces of queries written, the internal actions.

Each request line goes to the engine under a fresh internal id (`kgq<N>`), so two callers' equal ids never meet:
a query written whole, or a piece of a many-turn one (kgserve.engine.turns). Each line back is found by a byte
search for its id (kgserve.katago.protocol.locate_id) and given to its query's stream with the caller's id
restored byte for byte; a piece ends after one `isDuringSearch:false` line per turn of it (`noResults` lines
included) or an error line. KataGo warns once a query: of a query's pieces, only the first to warn is passed on;
an error line ends the whole query (every piece would get the same one: the rest are dropped). A piece whose
query is over (an error, the abort timeout, another engine's death) is an orphan: sent a terminate, its lines
dropped until it ends. Actions kgserve sends itself (`kga<N>`: query_version, query_models, terminate,
terminate_all) are answered through a future, or not awaited.

What a query's turns cost and which are written when is kgserve.engine.dispatch's (the router reports each turn
over to it); `outstanding_visits` here: requested visits x turns of this engine's pieces not yet finished (the
pool sends a query to the engine with the fewest). Nothing here touches a process: lines go out through `send`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

from kgserve.engine.errors import EngineDied
from kgserve.engine.holder import TurnHolder
from kgserve.engine.reserve import EngineLoad
from kgserve.engine.stream import Piece, QueryStream
from kgserve.katago.protocol import line_kind, locate_id, restore_id

__all__ = ["Router"]

log = logging.getLogger("kgserve.engine")
_ids = itertools.count(1)  # process-wide: an internal id is never reused, not even across restarts


class Router:
    """The pieces and actions in flight on one engine, and the routing of its stdout lines to them."""

    def __init__(
        self,
        owner: Any,
        send: Callable[[bytes], None],
        *,
        label: str,
        dispatch: TurnHolder,
        threads: int | None = None,
        index: int = 0,
    ) -> None:
        self.owner = owner  # the Engine (what a stream's `engine` says)
        self.label = label
        self.index = index
        self.dispatch = dispatch  # who holds the turns (kgserve.engine.holder): told of each turn over, each freeing
        self.load = EngineLoad(threads)  # turns in the engine (kgserve.engine.dispatch counts them)
        self.outstanding_visits = 0
        self.counters = {
            "queries": 0,
            "finished": 0,
            "died": 0,
            "aborted": 0,
            "lines": 0,
            "unrouted": 0,
            "partial_dropped": 0,  # partial lines a front end's per-client cap held back (QueryStream.partial_gate)
        }
        self._send = send
        self._pieces: dict[bytes, Piece] = {}
        self._actions: dict[bytes, asyncio.Future[bytes] | None] = {}

    @property
    def pending(self) -> int:
        """Pieces written and not finished (orphans included: the engine still works on them)."""
        return len(self._pieces)

    def pieces(self) -> Iterable[Piece]:
        """The pieces written and not finished, oldest first (orphans included)."""
        return self._pieces.values()

    # -- pieces --------------------------------------------------------------------------------------------
    def write(self, stream: QueryStream, taken: list[int | None], count: int) -> Piece:
        """Write the turns `taken` off the stream's plan (the whole query unless it is split) under a fresh id."""
        piece = Piece(stream, taken, count, f"kgq{next(_ids)}", self)
        piece.at_once = self.load.in_engine <= self.load.threads  # the dispatch counted its turns in already
        self._pieces[piece.internal_id.encode()] = piece
        self.outstanding_visits += stream.visits_per_turn * count
        if stream.router is not self:
            stream.router, stream.engine = self, self.owner
            self.counters["queries"] += 1
        stream.pieces.append(piece)
        stream.internal_id = piece.internal_id
        self._send(piece.line())
        return piece

    def terminate(self, piece: Piece, turns: list[int] | None = None) -> None:
        """KataGo `terminate` for the piece (only `turns` of it, when given): its last lines still come."""
        if turns is None:
            self.send_action("terminate", wait=False, terminateId=piece.internal_id)
        else:
            self.send_action("terminate", wait=False, terminateId=piece.internal_id, turnNumbers=turns)

    def drop(self, piece: Piece) -> int:
        """Take the piece off without waiting for its lines (its later lines go unrouted): its turns left."""
        if self._pieces.pop(piece.internal_id.encode(), None) is None:
            return 0
        self.outstanding_visits -= piece.stream.visits_per_turn * piece.finals_left
        if piece in piece.stream.pieces:
            piece.stream.pieces.remove(piece)
        return piece.finals_left

    def orphan(self, piece: Piece) -> None:
        """Its query is over: a terminate, and its lines dropped until it ends (its threads stay counted until then,
        or until the abort timeout: an engine that never answers does not keep them for good)."""
        if piece.orphan or piece.internal_id.encode() not in self._pieces:
            return
        piece.orphan = True
        self.terminate(piece)
        with contextlib.suppress(RuntimeError):  # no running loop (the rule's tests): nothing to expire
            asyncio.get_running_loop().call_later(self.dispatch.abort_timeout_s, self._orphan_expired, piece)

    def _orphan_expired(self, piece: Piece) -> None:
        if piece.internal_id.encode() in self._pieces:
            log.warning("%s: no answer to terminate %s within %gs: its threads counted free", self.label,
                        piece.internal_id, self.dispatch.abort_timeout_s)  # fmt: skip
            self.dispatch.gone(piece, self.drop(piece))

    def unstarted(self) -> list[Piece]:
        """The pieces the engine has not written a line for, of queries not being aborted (for another engine); the
        engine is sent a terminate for each, in case it wakes up. Taken off here; their turns are still counted."""
        taken = [
            piece
            for piece in self._pieces.values()
            if not piece.started and not piece.orphan and not piece.stream.aborted and not piece.stream.done
        ]
        for piece in taken:
            self.terminate(piece)
            self.drop(piece)
        return taken

    def fail_all(self, error: EngineDied) -> None:
        """The engine is gone: its pieces end (their queries with `error`), every awaited action too."""
        pieces = list(self._pieces.values())
        self._pieces.clear()
        self.outstanding_visits = 0
        self.dispatch.engine_gone(self, pieces, error)
        for future in self._actions.values():
            if future is not None and not future.done():
                future.set_exception(error)
        self._actions.clear()

    # -- actions (internal only) ---------------------------------------------------------------------------
    def send_action(self, action: str, *, wait: bool, **fields: Any) -> asyncio.Future[bytes] | None:
        """Send an action under a fresh internal id; with `wait`, a future for the engine's answer line."""
        internal = f"kga{next(_ids)}"
        future: asyncio.Future[bytes] | None = asyncio.get_running_loop().create_future() if wait else None
        self._actions[internal.encode()] = future
        payload = {"id": internal, "action": action, **fields}
        self._send((json.dumps(payload, separators=(",", ":")) + "\n").encode())
        return future

    # -- stdout --------------------------------------------------------------------------------------------
    def route(self, line: bytes) -> None:
        """One stdout line of the engine (no newline) to its query stream or action."""
        self.counters["lines"] += 1
        span = locate_id(line)
        key = line[span[0] : span[1]] if span is not None else b""
        piece = self._pieces.get(key) if span is not None else None
        if piece is not None and span is not None:
            self._to_piece(piece, line, span)
            return
        if key in self._actions:
            future = self._actions.pop(key)
            if future is not None and not future.done():
                future.set_result(line)
            return
        self.counters["unrouted"] += 1
        log.warning("%s: stdout line for no pending query: %s", self.label, line[:300].decode("utf-8", "replace"))

    def _to_piece(self, piece: Piece, line: bytes, span: tuple[int, int]) -> None:
        piece.started = True
        stream = piece.stream
        kind = line_kind(line, span[1])
        if piece.orphan:
            if kind in ("final", "error"):
                self._over(piece, 1 if kind == "final" else piece.finals_left, searched=False)
                self.dispatch.freed(self)
            return
        if kind == "partial" and stream.partial_gate is not None and not stream.partial_gate(len(line)):
            # dropped, but the engine is searching it: never taken back as unstarted from a frozen engine
            stream.started = True
            self.counters["partial_dropped"] += 1
            return
        if kind == "warning" and stream.warned_by is not piece:
            if stream.warned_by is not None:
                return  # another piece of the query said it already (KataGo warns once a query)
            stream.warned_by = piece
        stream._push(restore_id(line, span, stream.caller_id_json))
        if kind == "final":
            stream.finals_left -= 1
            self._over(piece, 1, searched=not stream.aborted and stream._open_turns is None)
            if stream.finals_left <= 0:
                self.dispatch.settle(stream, None)
            self.dispatch.freed(self)
        elif kind == "error":
            self._over(piece, piece.finals_left, searched=False)
            self.dispatch.settle(stream, None)
            self.dispatch.freed(self)

    def _over(self, piece: Piece, turns: int, *, searched: bool) -> None:
        """`turns` of the piece are over (a final line each, or its error line)."""
        turns = min(turns, piece.finals_left)
        piece.finals_left -= turns
        self.outstanding_visits -= piece.stream.visits_per_turn * turns
        self.dispatch.turns_over(piece, turns, piece.stream.visits_per_turn * turns if searched else 0)
        if piece.finals_left <= 0:
            self._pieces.pop(piece.internal_id.encode(), None)
            if piece in piece.stream.pieces:
                piece.stream.pieces.remove(piece)
