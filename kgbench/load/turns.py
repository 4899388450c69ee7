"""Pure: a response read line by line into its analysed turns. A query answers each turn it analyses with one
final line (`"isDuringSearch":false`, its `turnNumber`), possibly after partial ones (`reportDuringSearchEvery`);
a whole-game review (`analyzeTurns`) answers many turns, in any order. The tally counts the turns as their final
lines arrive (the load generator's windows count turns as they complete, not only whole requests), with their
visits, and checks that every turn asked for was answered exactly once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kgbench.load.responses import Outcome

__all__ = ["TurnCallback", "TurnTally", "expected_turns"]

TurnCallback = Callable[[int], None]  # called with a turn's visits when its final line arrives
_DECODER = json.JSONDecoder()
_TURN = re.compile(rb'"turnNumber":\s*(-?\d+)')
_FINAL = re.compile(rb'"isDuringSearch":\s*false')
_ROOT = re.compile(rb'"rootInfo":\s*')


def expected_turns(body: dict[str, object]) -> frozenset[int] | None:
    """The turns a query analyses: its analyzeTurns; None for a one-turn query (one final line, whatever its
    turnNumber)."""
    turns = body.get("analyzeTurns")
    if isinstance(turns, list):
        return frozenset(int(t) for t in turns if isinstance(t, int))
    return None


def _root_visits(line: bytes, at: int) -> int | None:
    match = _ROOT.match(line, at)
    if match is None:
        return None
    try:
        root, _ = _DECODER.raw_decode(line[match.end() :].decode("utf-8"))
    except ValueError:
        return None
    visits = root.get("visits") if isinstance(root, dict) else None
    return int(visits) if isinstance(visits, int | float) else None


@dataclass
class TurnTally:
    """Feed it every line of one query's response; ``outcome`` then says what the request got."""

    expected: frozenset[int] | None  # None: one turn, any number
    on_turn: TurnCallback | None = None
    visits: dict[int, int] = field(default_factory=dict)  # answered turn -> its final visits
    duplicates: int = 0
    partials: int = 0
    error: str | None = None  # the first error kind met (engine_error, bad_response)
    _rest: bytes = b""

    def feed(self, line: bytes) -> None:
        line = line.strip()
        if not line:
            return
        root = line.rfind(b'"rootInfo"')  # from the end: KataGo's sorted keys put rootInfo after moveInfos
        if root < 0:
            self._short_line(line)
            return
        if b'"isDuringSearch":false' not in line and _FINAL.search(line) is None:
            self.partials += 1
            return
        turn = _TURN.search(line, root)
        turn = turn if turn is not None else _TURN.search(line)
        visits = _root_visits(line, root)
        if visits is None or (turn is None and self.expected is not None):
            self.error = self.error or "bad_response"
            return
        number = int(turn.group(1)) if turn is not None else -1  # a one-turn query's line may omit it
        if number in self.visits:
            self.duplicates += 1
            return
        self.visits[number] = visits
        if self.on_turn is not None:
            self.on_turn(visits)

    def _short_line(self, line: bytes) -> None:
        """A line without an analysis: an error ends the query; KataGo's warning about a field does not."""
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and "warning" in doc and "error" not in doc:
            return
        if isinstance(doc, dict) and "error" in doc:
            self.error = self.error or "engine_error"
        elif isinstance(doc, dict) and doc.get("isDuringSearch") is True:
            self.partials += 1  # a partial report before the search had a root
        else:
            self.error = self.error or "bad_response"

    def feed_chunk(self, chunk: bytes) -> None:
        """Bytes of a stream, split into lines here (a line may span chunks)."""
        data = self._rest + chunk
        *lines, self._rest = data.split(b"\n")
        for line in lines:
            self.feed(line)

    def close(self) -> None:
        """The stream ended: a last line without its newline still counts."""
        if self._rest:
            self.feed(self._rest)
            self._rest = b""

    def feed_all(self, lines: Iterable[bytes]) -> TurnTally:
        for line in lines:
            self.feed(line)
        return self

    @property
    def turns(self) -> int:
        return len(self.visits)

    def outcome(self, status: int, nbytes: int) -> Outcome:
        """200 with every expected turn answered once: a success with the visits summed; otherwise the error kind
        (missing_turns: some turn never answered, or answered twice)."""
        visits = sum(self.visits.values()) if self.visits else None
        error = self.error
        answered_all = len(self.visits) == 1 if self.expected is None else set(self.visits) == self.expected
        if error is None and (self.duplicates or not answered_all):
            error = "missing_turns" if self.visits else "bad_response"
        return Outcome(status, nbytes, visits, error, self.turns, self.partials)
