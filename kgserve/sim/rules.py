"""Go board for the simulated engine: KataGo's coordinate, player and rules parsing, and the tolerant move
replay the analysis engine uses for a query's `moves` (BoardHistory::makeBoardMoveTolerant).

Tolerant replay, as in KataGo: a move is illegal only when its point is occupied or it retakes a simple ko
on the very next move; suicide is tolerated regardless of the rules (the suicided group is removed).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

__all__ = ["BLACK", "EMPTY", "PASS", "WHITE", "Board", "loc_to_str", "parse_loc", "parse_player", "parse_rules"]

EMPTY, BLACK, WHITE = 0, 1, 2
PASS = -1
COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"

_RULE_NAMES = {
    "japanese": "japanese",
    "korean": "japanese",
    "chinese": "chinese",
    "chinese-ogs": "chinese",
    "chinese_ogs": "chinese",
    "chinese-kgs": "chinese",
    "chinese_kgs": "chinese",
    "tromp-taylor": "tromp-taylor",
    "tromp_taylor": "tromp-taylor",
    "tromptaylor": "tromp-taylor",
    "new-zealand": "new-zealand",
    "new_zealand": "new-zealand",
    "newzealand": "new-zealand",
    "nz": "new-zealand",
    "aga": "aga",
    "bga": "aga",
    "french": "aga",
    "aga-button": "aga",
    "aga_button": "aga",
    "stone-scoring": "stone-scoring",
    "stone_scoring": "stone-scoring",
    "stonescoring": "stone-scoring",
}
_RULE_KEYS = {
    "ko",
    "koRule",
    "scoring",
    "scoringRule",
    "tax",
    "taxRule",
    "suicide",
    "multiStoneSuicideLegal",
    "hasButton",
    "whiteHandicapBonus",
    "whiteHandicapBonusRule",
    "friendlyPassOk",
    "komi",
}


def parse_rules(value: str | dict[str, object]) -> str | None:
    """Canonical rules name, or None when KataGo's Rules::tryParseRules would fail."""
    if isinstance(value, dict):
        return "custom" if value and set(value) <= _RULE_KEYS else None
    text = value.strip().lower()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return None
        return parse_rules(parsed) if isinstance(parsed, dict) else None
    return _RULE_NAMES.get(text)


def parse_player(text: str) -> int | None:
    lowered = text.strip().lower()
    if lowered in ("b", "black"):
        return BLACK
    if lowered in ("w", "white"):
        return WHITE
    return None


def parse_loc(text: str, x_size: int, y_size: int) -> int | None:
    """Location::tryOfString: GTP vertex (no I), 'pass', or '(x,y)'; None when unparsable or off-board."""
    s = text.strip()
    lowered = s.lower()
    if lowered == "pass":
        return PASS
    if s.startswith("(") and s.endswith(")"):
        parts = s[1:-1].split(",")
        if len(parts) != 2:
            return None
        try:
            x, y = int(parts[0]), int(parts[1])
        except ValueError:
            return None
    else:
        if len(s) < 2:
            return None
        col = COLUMNS.find(s[0].upper())
        if col < 0 or not s[1:].isdigit():
            return None
        x, y = col, y_size - int(s[1:])
    if not (0 <= x < x_size and 0 <= y < y_size):
        return None
    return y * x_size + x


def loc_to_str(loc: int, x_size: int, y_size: int) -> str:
    if loc == PASS:
        return "pass"
    x, y = loc % x_size, loc // x_size
    return f"{COLUMNS[x]}{y_size - y}"


_NEIGHBOURS: dict[tuple[int, int], list[tuple[int, ...]]] = {}


def _neighbours(x_size: int, y_size: int) -> list[tuple[int, ...]]:
    key = (x_size, y_size)
    if key not in _NEIGHBOURS:
        table = []
        for loc in range(x_size * y_size):
            x, y = loc % x_size, loc // x_size
            adj = [(x - 1, y), (x + 1, y), (x, y - 1), (x, y + 1)]
            table.append(tuple(b * x_size + a for a, b in adj if 0 <= a < x_size and 0 <= b < y_size))
        _NEIGHBOURS[key] = table
    return _NEIGHBOURS[key]


@dataclass
class Board:
    x_size: int
    y_size: int
    stones: list[int] = field(default_factory=list)
    ko_loc: int | None = None

    def __post_init__(self) -> None:
        if not self.stones:
            self.stones = [EMPTY] * (self.x_size * self.y_size)
        self._adj = _neighbours(self.x_size, self.y_size)

    def copy(self) -> Board:
        return Board(self.x_size, self.y_size, list(self.stones), self.ko_loc)

    def set_stone(self, loc: int, color: int) -> None:
        self.stones[loc] = color
        self.ko_loc = None

    def _group(self, loc: int) -> tuple[list[int], bool]:
        color = self.stones[loc]
        seen = {loc}
        stack = [loc]
        has_liberty = False
        while stack:
            cur = stack.pop()
            for n in self._adj[cur]:
                c = self.stones[n]
                if c == EMPTY:
                    has_liberty = True
                elif c == color and n not in seen:
                    seen.add(n)
                    stack.append(n)
        return list(seen), has_liberty

    def play_tolerant(self, loc: int, player: int) -> bool:
        """Play a move as the analysis engine replays history; False for an illegal move (occupied, ko)."""
        if loc == PASS:
            self.ko_loc = None
            return True
        if self.stones[loc] != EMPTY or loc == self.ko_loc:
            return False
        opponent = BLACK + WHITE - player
        self.stones[loc] = player
        captured: list[int] = []
        for n in self._adj[loc]:
            if self.stones[n] == opponent:
                group, alive = self._group(n)
                if not alive:
                    for s in group:
                        self.stones[s] = EMPTY
                    captured.extend(group)
        own, alive = self._group(loc)
        if not alive:  # suicide: tolerated, the group is removed
            for s in own:
                self.stones[s] = EMPTY
        self.ko_loc = None
        if len(captured) == 1 and len(own) == 1:
            libs = [n for n in self._adj[loc] if self.stones[n] == EMPTY]
            if libs == [captured[0]]:
                self.ko_loc = captured[0]
        return True

    def position_key(self, to_move: int, rules: str, komi: float) -> bytes:
        return bytes(self.stones) + bytes([to_move, self.x_size, self.y_size]) + f"{rules}{komi}".encode()

    def hash_hex(self, to_move: int, salt: bytes = b"") -> str:
        digest = hashlib.blake2b(bytes(self.stones) + bytes([to_move]) + salt, digest_size=16).hexdigest()
        return digest.upper()

    def empties(self) -> list[int]:
        return [i for i, c in enumerate(self.stones) if c == EMPTY]
