"""SGF (FF[4]) for one game's main line: what a review service stores and KaTrain or Sabaki open (kgbench's game library
and `python -m kgserve.batch` read it; kgserve owns it because kgserve never imports kgbench).

Read: the root's properties (SZ, KM, RU, PB, PW, RE, GN, ...), setup stones (AB, AW), the player to move (PL) and
the main line's moves (B, W), variations skipped. Written: one game, one property per line group, moves in nodes.
Vertices come back as GTP vertices (`D4`: column letter without I, row counted from the bottom), as KataGo's
analysis queries take them; a pass is `pass` (``B[]``, or ``B[tt]`` on boards up to 19x19).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["SgfError", "SgfGame", "from_gtp", "parse_sgf", "to_gtp", "write_sgf"]

COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"  # GTP: no I
_PROP = re.compile(r"\s*([A-Za-z]+)\s*((?:\[(?:[^\]\\]|\\.)*\]\s*)+)", re.S)
_VALUE = re.compile(r"\[((?:[^\]\\]|\\.)*)\]", re.S)


class SgfError(ValueError):
    """The text is not an SGF game this reader understands; the message says where."""


@dataclass(frozen=True)
class SgfGame:
    size: int
    komi: float
    rules: str  # the RU value as written (Japanese, Chinese, ...)
    moves: tuple[tuple[str, str], ...]  # (colour B|W, GTP vertex or pass)
    setup: tuple[tuple[str, str], ...] = ()  # AB / AW stones as (colour, GTP vertex)
    to_move: str | None = None  # PL
    props: Mapping[str, str] = field(default_factory=dict)  # every root property's first value, unescaped


def to_gtp(sgf_point: str, size: int) -> str:
    """SGF point ('pd') -> GTP vertex ('Q16'); '' or 'tt' (on boards up to 19x19) -> 'pass'."""
    if sgf_point == "" or (sgf_point == "tt" and size <= 19):
        return "pass"
    if len(sgf_point) != 2 or not sgf_point.isalpha() or not sgf_point.islower():
        raise SgfError(f"bad SGF point {sgf_point!r}")
    x, y_top = ord(sgf_point[0]) - 97, ord(sgf_point[1]) - 97
    if not (0 <= x < size and 0 <= y_top < size):
        raise SgfError(f"SGF point {sgf_point!r} is off a {size}x{size} board")
    return f"{COLUMNS[x]}{size - y_top}"


def from_gtp(vertex: str, size: int) -> str:
    """GTP vertex ('Q16') -> SGF point ('pd'); 'pass' -> '' (FF[4])."""
    if vertex.lower() == "pass":
        return ""
    x = COLUMNS.index(vertex[0].upper())
    row = int(vertex[1:])
    if not (0 <= x < size and 1 <= row <= size):
        raise SgfError(f"vertex {vertex!r} is off a {size}x{size} board")
    return chr(97 + x) + chr(97 + size - row)


def _unescape(text: str) -> str:
    text = re.sub(r"\\\r?\n", "", text)  # a soft line break
    return re.sub(r"\\(.)", r"\1", text, flags=re.S)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("]", "\\]")


def _nodes(text: str) -> list[dict[str, list[str]]]:
    """The main line's nodes: the first game tree, at each branching its first variation. The main line ends at
    the first ')' it meets: whatever follows are other variations."""
    start = text.find("(")
    if start < 0 or not text[start + 1 :].lstrip().startswith(";"):
        raise SgfError("no game tree: an SGF game starts with '(;'")
    nodes: list[dict[str, list[str]]] = []
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == ";":
            node: dict[str, list[str]] = {}
            i += 1
            while (m := _PROP.match(text, i)) is not None:
                node.setdefault(m.group(1).upper(), []).extend(_unescape(v) for v in _VALUE.findall(m.group(2)))
                i = m.end()
            nodes.append(node)
        elif c == ")":
            return nodes
        elif c == "(" or c.isspace():  # '(': the first variation, where the main line goes on
            i += 1
        else:
            raise SgfError(f"unexpected {c!r} at offset {i}")
    raise SgfError("unbalanced parentheses: the game tree never closes")


def parse_sgf(text: str) -> SgfGame:
    """The first game of an SGF text: its root properties and main line."""
    nodes = _nodes(text)
    if not nodes:
        raise SgfError("empty game tree")
    root = nodes[0]
    size_text = (root.get("SZ") or ["19"])[0]
    if ":" in size_text:
        raise SgfError(f"rectangular boards are not read (SZ[{size_text}])")
    try:
        size = int(size_text)
        komi = float((root.get("KM") or ["0"])[0] or 0)
    except ValueError as exc:
        raise SgfError(f"bad SZ or KM: {exc}") from None
    if not 2 <= size <= 25:
        raise SgfError(f"board size {size} is outside 2..25")
    setup = tuple((colour, to_gtp(p, size)) for key, colour in (("AB", "B"), ("AW", "W")) for p in root.get(key, []))
    moves: list[tuple[str, str]] = []
    for number, node in enumerate(nodes):
        played = [(colour, node[colour][0]) for colour in ("B", "W") if colour in node]
        if len(played) > 1:
            raise SgfError(f"node {number} holds both a black and a white move")
        if played:
            moves.append((played[0][0], to_gtp(played[0][1], size)))
    props = {key: values[0] for key, values in root.items() if values}
    pl = props.get("PL", "").upper()[:1] or None
    return SgfGame(size, komi, props.get("RU", ""), tuple(moves), setup, pl, props)


def write_sgf(
    size: int,
    komi: float,
    rules: str,
    moves: Iterable[tuple[str, str]],
    props: Mapping[str, str] | None = None,
) -> str:
    """One game as SGF text: FF[4] GM[1] CA[UTF-8], SZ, KM, RU, then ``props`` in the given order, then the moves
    (ten to a line)."""
    root = {"FF": "4", "GM": "1", "CA": "UTF-8", "SZ": str(size), "KM": f"{komi:g}", "RU": rules, **(props or {})}
    head = "".join(f"{key}[{_escape(str(value))}]" for key, value in root.items())
    nodes = [f";{colour}[{from_gtp(vertex, size)}]" for colour, vertex in moves]
    lines = ["".join(nodes[i : i + 10]) for i in range(0, len(nodes), 10)]
    return "(;" + head + "\n" + "\n".join(lines) + ")\n"
