"""Go board of the simulated engine, as KataGo's Board and Location (game/board.cpp) behave for the analysis engine.

- Vertices parse as Location::tryOfString: trimmed (KataGo's six whitespace characters only), case-insensitive
  letters without I, a signed row number, `pass`/`pss`, or `(x,y)`. `(x,y)` is NOT bounds-checked by KataGo: it
  maps to the padded array location (x+1)+(y+1)*(xSize+1), which may be another point, a pass, the null location
  (a parse error) or a wall. A wall is kept here as OFF_BOARD + that array location; playing it is illegal.
- `set_stone` is Board::setStone (initialStones): it captures, a single-stone suicide is not placed at all, a
  multi-stone suicide removes the group.
- `tolerant_ok` is the check of BoardHistory::makeBoardMoveTolerant, with which the engine replays `moves`: an
  occupied point and a single-stone suicide are illegal; ko is NOT checked; multi-stone suicide is allowed.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from kgserve.katago.rules import WHITESPACE, ascii_lower

__all__ = [
    "BLACK",
    "EMPTY",
    "OFF_BOARD",
    "PASS",
    "WHITE",
    "Board",
    "loc_to_str",
    "opponent",
    "parse_loc",
    "parse_player",
]

EMPTY, BLACK, WHITE = 0, 1, 2
PASS = -1
OFF_BOARD = 1 << 20
COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"
_INT = re.compile(r"[+-]?[0-9]+")
_INT_MAX = 2**31 - 1


def opponent(player: int) -> int:
    return BLACK + WHITE - player


def parse_player(text: str) -> int | None:
    """PlayerIO::tryParsePlayer: no trimming, ASCII case folding."""
    lowered = ascii_lower(text)
    if lowered in ("b", "black"):
        return BLACK
    if lowered in ("w", "white"):
        return WHITE
    return None


def _to_int(text: str) -> int | None:
    """Global::tryStringToInt: a trimmed, signed decimal that fits an int."""
    s = text.strip(WHITESPACE)
    if not _INT.fullmatch(s):
        return None
    value = int(s)
    return value if -_INT_MAX - 1 <= value <= _INT_MAX else None


def _letter(c: str) -> int | None:
    upper = c.upper() if c.isascii() else ""
    return COLUMNS.find(upper) if upper and upper in COLUMNS else None


def _from_array_loc(raw: int, x_size: int, y_size: int) -> int | None:
    if raw == 0:  # Board::NULL_LOC
        return None
    if raw == 1:  # Board::PASS_LOC
        return PASS
    x, y = raw % (x_size + 1) - 1, raw // (x_size + 1) - 1
    if raw > 0 and 0 <= x < x_size and 0 <= y < y_size:
        return y * x_size + x
    return OFF_BOARD + raw


def parse_loc(text: str, x_size: int, y_size: int) -> int | None:
    """Location::tryOfString; None when KataGo cannot parse it."""
    s = text.strip(WHITESPACE)
    if len(s.encode("utf-8")) < 2:
        return None
    if ascii_lower(s) in ("pass", "pss"):
        return PASS
    if s[0] == "(":
        if s[-1] != ")":
            return None
        pieces = s[1:-1].split(",")
        if len(pieces) != 2:
            return None
        px, py = _to_int(pieces[0]), _to_int(pieces[1])
        if px is None or py is None:
            return None
        return _from_array_loc((px + 1) + (py + 1) * (x_size + 1), x_size, y_size)
    x = _letter(s[0])
    if x is None:
        return None
    rest = s[1:]
    if rest[:1].isascii() and rest[:1].isalpha():  # extended two-letter columns: always off a 19x19 board
        second = _letter(rest[0])
        if second is None:
            return None
        x = (x + 1) * 25 + second
        rest = rest[1:]
    row = _to_int(rest)
    if row is None:
        return None
    y = y_size - row
    if not (0 <= x < x_size and 0 <= y < y_size):
        return None
    return y * x_size + x


def _c_div(a: int, b: int) -> int:
    q = abs(a) // b
    return q if a >= 0 else -q


def loc_to_str(loc: int, x_size: int, y_size: int) -> str:
    """Location::toString; walls print as `(x,y)` of the padded array, with C's truncating division."""
    if loc == PASS:
        return "pass"
    if loc >= OFF_BOARD // 2:
        raw = loc - OFF_BOARD
        x = raw - _c_div(raw, x_size + 1) * (x_size + 1) - 1
        return f"({x},{_c_div(raw, x_size + 1) - 1})"
    return f"{COLUMNS[loc % x_size]}{y_size - loc // x_size}"


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

    def on_board(self, loc: int) -> bool:
        return 0 <= loc < len(self.stones)

    def chain(self, loc: int) -> tuple[list[int], int]:
        """The chain at `loc` and its number of liberties."""
        color = self.stones[loc]
        seen, stack, libs = {loc}, [loc], set()
        while stack:
            for n in self._adj[stack.pop()]:
                c = self.stones[n]
                if c == EMPTY:
                    libs.add(n)
                elif c == color and n not in seen:
                    seen.add(n)
                    stack.append(n)
        return list(seen), len(libs)

    def _libs(self, loc: int) -> int:
        return self.chain(loc)[1]

    def is_suicide(self, loc: int, player: int) -> bool:
        """Board::isSuicide: the stone would have no liberty (own chains filled, nothing captured)."""
        for n in self._adj[loc]:
            c = self.stones[n]
            if c == EMPTY or (c == player and self._libs(n) > 1) or (c != player and self._libs(n) == 1):
                return False
        return True

    def is_illegal_suicide(self, loc: int, player: int, multi_stone_legal: bool) -> bool:
        """Board::isIllegalSuicide: a single-stone suicide always, a multi-stone one unless the rules allow it."""
        for n in self._adj[loc]:
            c = self.stones[n]
            if c == EMPTY:
                return False
            if c == player and (multi_stone_legal or self._libs(n) > 1):
                return False
            if c not in (EMPTY, player) and self._libs(n) == 1:
                return False
        return True

    def play(self, loc: int, player: int) -> None:
        """Board::playMoveAssumeLegal: captures, the simple ko point, then suicide removal."""
        if loc == PASS:
            self.ko_loc = None
            return
        self.stones[loc] = player
        captured: list[int] = []
        for n in self._adj[loc]:
            if self.stones[n] == opponent(player):
                group, libs = self.chain(n)
                if libs == 0:
                    for s in group:
                        self.stones[s] = EMPTY
                    captured.extend(group)
        own, libs = self.chain(loc)
        self.ko_loc = captured[0] if len(captured) == 1 and len(own) == 1 and libs == 1 else None
        if libs == 0:
            for s in own:
                self.stones[s] = EMPTY

    def set_stone(self, loc: int, color: int) -> None:
        """Board::setStone, as `initialStones` are placed."""
        if self.on_board(loc) and self.stones[loc] != color:
            if self.stones[loc] == EMPTY:
                if not self.is_illegal_suicide(loc, color, True):
                    self.play(loc, color)
            else:
                self.stones[loc] = EMPTY
                if not self.is_suicide(loc, color):
                    self.play(loc, color)
        self.ko_loc = None

    def tolerant_ok(self, loc: int, player: int) -> bool:
        """makeBoardMoveTolerant's test: Board::isLegalIgnoringKo with multi-stone suicide allowed."""
        if loc == PASS:
            return True
        return self.on_board(loc) and self.stones[loc] == EMPTY and not self.is_illegal_suicide(loc, player, True)

    def position_key(self, to_move: int, rules: str, komi: float) -> bytes:
        return bytes(self.stones) + bytes([to_move, self.x_size, self.y_size]) + f"{rules}{komi}".encode()

    def hash_hex(self, to_move: int, salt: bytes = b"") -> str:
        digest = hashlib.blake2b(bytes(self.stones) + bytes([to_move]) + salt, digest_size=16).hexdigest()
        return digest.upper()

    def empties(self) -> list[int]:
        return [i for i, c in enumerate(self.stones) if c == EMPTY]
