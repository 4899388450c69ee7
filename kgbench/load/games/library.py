"""The repository's real games (`assets/analysis/games/<N>x<N>/*.sgf`, played by a real KataGo: their README and
each file's GC property say how) as the traffic's games (kgbench.load.traffic.Game): rules, komi, board size and
moves, as an analysis query takes them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from kgbench.load.traffic import Game
from kgserve.katago.sgf import SgfError, SgfGame, parse_sgf
from kgserve.paths import PROJECT_ROOT

__all__ = ["GAMES_DIR", "GameFileError", "game_files", "load_library", "query_rules", "to_traffic_game"]

GAMES_DIR = PROJECT_ROOT / "assets" / "analysis" / "games"
_RULES = {"japanese": "japanese", "chinese": "chinese", "korean": "korean", "aga": "aga", "new zealand": "new-zealand",
          "nz": "new-zealand", "tromp-taylor": "tromp-taylor", "tromp taylor": "tromp-taylor"}  # fmt: skip


class GameFileError(ValueError):
    """A game file that cannot be read; the message names it."""


def query_rules(sgf_rules: str) -> str:
    """SGF's RU value -> KataGo's rules name (Japanese when RU is absent, as SGF readers assume)."""
    name = sgf_rules.strip().lower() or "japanese"
    if name not in _RULES:
        raise ValueError(f"rules {sgf_rules!r} have no KataGo name here (known: {sorted(set(_RULES))})")
    return _RULES[name]


def to_traffic_game(name: str, game: SgfGame) -> Game:
    base = {"rules": query_rules(game.rules), "komi": game.komi, "boardXSize": game.size, "boardYSize": game.size}
    if game.to_move and game.setup:
        base["initialPlayer"] = game.to_move
    return Game(name=name, base=base, moves=game.moves, stones=game.setup, size=game.size, komi=game.komi)


def game_files(root: Path = GAMES_DIR, sizes: Iterable[int] | None = None) -> list[Path]:
    """The SGF files under ``root`` (optionally only the boards of ``sizes``), sorted by path."""
    wanted = None if sizes is None else {f"{s}x{s}" for s in sizes}
    return sorted(p for p in Path(root).rglob("*.sgf") if wanted is None or p.parent.name in wanted)


def load_library(root: Path = GAMES_DIR, sizes: Sequence[int] | None = None) -> list[Game]:
    """Every game under ``root`` as a traffic Game, named by its file's stem."""
    games: list[Game] = []
    for path in game_files(root, sizes):
        try:
            games.append(to_traffic_game(path.stem, parse_sgf(path.read_text(encoding="utf-8"))))
        except (OSError, SgfError, ValueError) as exc:
            raise GameFileError(f"{path}: {exc}") from None
    if not games:
        raise GameFileError(f"no games (*.sgf) under {root}" + (f" for boards {list(sizes)}" if sizes else ""))
    return games
