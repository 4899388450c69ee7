"""What the batch command analyses: rows, one analysis query each, in input order.

Two kinds of input:
- SGF game records (files, or folders searched for `*.sgf`): one query per chosen position of each record's main
  line (`PositionSpec`: every turn, every Nth, a seeded random sample, or the last position). Board size, rules and
  komi come from the record; its setup stones (AB/AW: handicap stones among them) become `initialStones` and the
  player who moves first `initialPlayer`. A record that cannot be read is reported by name and skipped.
  A query's id is `<record>:<turn>` (the record's path under the folder given, the number of moves played).
- JSONL queries, one per line as `katago analysis` reads them. A line KataGo would refuse (not JSON, not an
  object, no string id, an action) keeps its place: its answer is KataGo's own error line for it, made here.

Rows are produced twice by a run (once to count and digest them, once to send them): nothing holds every query in
memory, and the SGF sampling is seeded per record, so both passes agree.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgserve.katago.protocol import INCLUDE_FIELDS, Query, Rejected, classify_line
from kgserve.katago.rules import parse_rules
from kgserve.katago.sgf import SgfError, SgfGame, parse_sgf

__all__ = [
    "INCLUDE_FLAGS",
    "InputError",
    "JsonlSource",
    "PositionSpec",
    "QuerySettings",
    "Row",
    "RowSource",
    "SgfSource",
    "Survey",
    "survey",
]

INCLUDE_FLAGS = INCLUDE_FIELDS  # each a --include-... flag of the command


class InputError(ValueError):
    """Input the command cannot run on (a missing path, a duplicate id, a bad option); the message says which."""


@dataclass(frozen=True, slots=True)
class Row:
    index: int  # its place in the input (and in the output)
    caller_id: str | None  # None: a line KataGo would answer without an id
    line: bytes | None  # the query line to send, the settings applied
    rejected: bytes | None = None  # instead of a query: KataGo's error line for this input line
    finals: int = 1  # final lines the query asks for (one per analysed turn)


@dataclass(frozen=True)
class QuerySettings:
    """What the command sets on every query: --visits, the --include-* flags, --override-settings."""

    visits: int | None = None
    include: tuple[str, ...] = ()
    override: Mapping[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.visits is None and not self.include and not self.override

    def apply(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.empty:
            return body
        body = dict(body)
        if self.visits is not None:
            body["maxVisits"] = self.visits
        for name in self.include:
            body[name] = True
        if self.override:
            body["overrideSettings"] = {**(body.get("overrideSettings") or {}), **self.override}
        return body

    def digest(self) -> str:
        text = json.dumps(
            {"visits": self.visits, "include": sorted(self.include), "override": dict(self.override)}, sort_keys=True
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PositionSpec:
    """Which positions of a record: `all` (every turn, the empty or setup board included), `last`, `every:N`
    (turns 0, N, 2N, ... and the last), `sample:K` (K turns at random, seeded per record)."""

    mode: str = "all"
    n: int = 0
    seed: int = 0

    @classmethod
    def parse(cls, text: str, seed: int = 0) -> PositionSpec:
        mode, _, number = text.partition(":")
        if mode in ("all", "last") and not number:
            return cls(mode, 0, seed)
        if mode in ("every", "sample") and number.isdigit() and int(number) > 0:
            return cls(mode, int(number), seed)
        raise InputError(f"--positions {text!r}: expected all, last, every:N or sample:K (N, K > 0)")

    def turns(self, moves: int, record: str) -> list[int]:
        if self.mode == "last":
            return [moves]
        if self.mode == "every":
            chosen = list(range(0, moves + 1, self.n))
            return chosen if chosen[-1] == moves else [*chosen, moves]
        if self.mode == "sample":
            # seeded by the record's name: the same turns on every pass and every rerun, whatever the file order
            picker = random.Random(f"{self.seed}:{record}")
            return sorted(picker.sample(range(moves + 1), min(self.n, moves + 1)))
        return list(range(moves + 1))

    def describe(self) -> str:
        return self.mode + (f":{self.n}" if self.n else "") + (f" seed {self.seed}" if self.mode == "sample" else "")


class RawJson(str):
    """JSON text kept as text: a record's moves, each encoded once per record, a position's `moves` their prefix
    (encoding every position's moves again made a long game's positions cost O(moves^2) in Python)."""


_SLOT = "\x00raw\x00"  # stands in for a RawJson while the rest is encoded (no id or path holds a NUL)
_SLOT_JSON = json.dumps(_SLOT)


def _compact(body: dict[str, Any]) -> bytes:
    """A query as one line for the engine: compact JSON (any JSON KataGo reads will do; Python's encoder is ~10x
    faster than kgserve's nlohmann-exact dump, which only responses need)."""
    moves = body.get("moves")
    if isinstance(moves, RawJson):
        text = json.dumps({**body, "moves": _SLOT}, ensure_ascii=False, separators=(",", ":"))
        return text.replace(_SLOT_JSON, moves, 1).encode()
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _query_rules(sgf_rules: str) -> str:
    """RU as a query's rules: any value KataGo's rules parser takes (names, KataGo self-play's compact
    `koPOSITIONALscoreAREA...`); absent: japanese, as SGF readers assume."""
    text = sgf_rules.strip() or "japanese"
    if parse_rules(text) is None:
        raise SgfError(f"rules RU[{sgf_rules}] are not a rules value KataGo reads")
    return text


def position_query(record: str, game: SgfGame, turn: int, move_texts: Sequence[str] | None = None) -> dict[str, Any]:
    """The analysis query for `game` after its first `turn` moves (`move_texts`: each move as JSON, once)."""
    texts = move_texts if move_texts is not None else [json.dumps(list(move)) for move in game.moves]
    query: dict[str, Any] = {
        "id": f"{record}:{turn}",
        "rules": _query_rules(game.rules),
        "komi": game.komi,
        "boardXSize": game.size,
        "boardYSize": game.size,
        "moves": RawJson("[" + ",".join(texts[:turn]) + "]"),
    }
    if game.setup:
        query["initialStones"] = [list(stone) for stone in game.setup]
    # who moves first: PL, else the first move's colour (white after handicap stones); KataGo's default is black
    first = game.to_move or (game.moves[0][0] if game.moves else None)
    if first in ("B", "W"):
        query["initialPlayer"] = first
    return query


class SgfSource:
    """SGF records under the given paths, in the order given (a folder's records sorted by path)."""

    def __init__(self, paths: Sequence[Path], spec: PositionSpec) -> None:
        self.spec = spec
        self.records: list[tuple[str, Path]] = []
        for path in paths:
            if path.is_dir():
                self.records += [(p.relative_to(path).as_posix(), p) for p in sorted(path.rglob("*.sgf"))]
            elif path.is_file():
                self.records.append((path.name, path))
            else:
                raise InputError(f"{path}: no such file or folder")
        self.problems: dict[str, str] = {}  # record -> why it was skipped

    def describe(self) -> str:
        return f"{len(self.records)} SGF records, positions {self.spec.describe()}"

    def items(self) -> Iterator[tuple[bytes | None, Query | Rejected]]:
        for record, path in self.records:
            try:
                game = parse_sgf(path.read_text(encoding="utf-8-sig"))
                texts = [json.dumps(list(move), separators=(",", ":")) for move in game.moves]
                turns = self.spec.turns(len(game.moves), record)
                queries = [position_query(record, game, turn, texts) for turn in turns]
            except (OSError, UnicodeDecodeError, SgfError) as exc:
                self.problems[record] = str(exc)
                continue
            for body in queries:  # no text yet: survey encodes each query once, rows once with the settings
                yield None, Query(body["id"], body, 1, None, None)


class JsonlSource:
    """JSONL files of analysis queries, one per line, as `katago analysis` reads them (blank lines skipped)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        for path in paths:
            if not path.is_file():
                raise InputError(f"{path}: no such file")
        self.paths = list(paths)
        self.problems: dict[str, str] = {}

    def describe(self) -> str:
        return f"{len(self.paths)} JSONL file(s)"

    def items(self) -> Iterator[tuple[bytes | None, Query | Rejected]]:
        for path in self.paths:
            with path.open("rb") as lines:
                for line in lines:
                    if line.strip():
                        yield line.rstrip(b"\r\n"), classify_line(line)


RowSource = SgfSource | JsonlSource


def rows(source: RowSource, settings: QuerySettings) -> Iterator[Row]:
    for index, (_, item) in enumerate(source.items()):
        if isinstance(item, Rejected):
            yield Row(index, item.caller_id, None, item.error_line)
        elif settings.empty and item.raw is not None:
            yield Row(index, item.caller_id, item.raw, finals=item.expected_finals)
        else:
            line = _compact(settings.apply(item.body))
            yield Row(index, item.caller_id, line, finals=item.expected_finals)


@dataclass(frozen=True)
class Survey:
    rows: int
    digest: str  # of the input rows as read, before the settings
    problems: Mapping[str, str]  # records skipped, and why


def survey(source: RowSource) -> Survey:
    """Count and digest the rows; a duplicate id is refused (the output holds each id once)."""
    digest = hashlib.sha256()
    seen: dict[str, int] = {}
    count = 0
    for index, (text, item) in enumerate(source.items()):
        if text is None:
            text = _compact(item.body) if isinstance(item, Query) else item.error_line
        digest.update(text + b"\n")
        count += 1
        if item.caller_id is not None and isinstance(item, Query):
            if item.caller_id in seen:
                raise InputError(f"id {item.caller_id!r} appears twice (queries {seen[item.caller_id] + 1} and "
                                 f"{index + 1}): each id must be unique to be answered once")  # fmt: skip
            seen[item.caller_id] = index
    return Survey(count, digest.hexdigest()[:16], dict(source.problems))
