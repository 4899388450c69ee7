"""KaTrain's own message rate over /ws: what the message bounds (`websocket.max_messages_per_s`,
`limits.max_messages_per_s_per_client`, issue 36) must let through untouched.

``python -m benchmarks.katrain_traffic [--moves 300] [--steps 60]``

KaTrain's RemoteKataGoEngine (the `katrain` extra) against kgserve on the simulated engine (shipped limits), doing
what KaTrain does at its busiest, with KaTrain's own code for each step (katrain.core.game / game_node):

1. open a game of `--moves` moves: `Game.analyze_all_nodes`, a query per node, sent back to back;
2. at once open another of the same length: `on_new_game` (a `terminate` per query still outstanding), then its
   nodes' queries;
3. a sweep of an early position (move 10): `analyze_extra("sweep")`, a query per empty point (351);
4. step through `--steps` moves with pondering on, at key-repeat speed (30 a second): each step a `terminate` of
   the ponder and a new ponder query.

Every message KaTrain sends is timed (its socket's `send`); the table gives, per step and in all, the messages,
the most in any second and in any 100 ms, and kgserve's count of messages it read late for a bound
(`kgserve_websocket_paced_messages_total`; 0: KaTrain never met one) and the error lines without an id KaTrain got.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import threading
import time
from bisect import bisect_left
from pathlib import Path
from typing import Any

from benchmarks.hostile import hostile_server
from benchmarks.hostile import parse_args as hostile_args
from benchmarks.hostile_attacks.common import metric
from kgbench.track.machine import machine_line

__all__ = ["busiest", "game_moves", "katrain_config", "main"]

KEY_REPEAT_S = 1 / 30
SWEEP_AT = 10  # the sweep's position: after 10 moves, 351 empty points (KaTrain sweeps wherever the user is)


def game_moves(count: int) -> list[tuple[str, tuple[int, int]]]:
    """`count` legal moves on 19x19 that capture nothing: black fills columns 0-8 row by row, white 10-18, column
    9 stays empty (both groups keep its liberties)."""
    black = [(x, y) for y in range(19) for x in range(9)]
    white = [(x, y) for y in range(19) for x in range(10, 19)]
    if count > 2 * (len(black) - 19):
        raise ValueError(f"at most {2 * (len(black) - 19)} moves")
    return [("B", black[i // 2]) if i % 2 == 0 else ("W", white[i // 2]) for i in range(count)]


def katrain_config(remote_url: str) -> dict[str, Any]:
    """KaTrain's engine settings for its remote engine at `remote_url` (a WebSocket URL): 40 visits a query, 10
    for its fast ones (a game's nodes, a sweep), no reconnecting, no ownership."""
    return {
        "backend": "remote",
        "remote_url": remote_url,
        "allow_recovery": False,
        "max_visits": 40,
        "fast_visits": 10,
        "max_time": 30.0,
        "wide_root_noise": 0.0,
        "_enable_ownership": False,
    }


def busiest(times: list[float], window_s: float) -> int:
    """The most of `times` (sorted) in any window of `window_s` seconds."""
    return max((bisect_left(times, t + window_s) - i for i, t in enumerate(times)), default=0)


class _Recorder:
    def __init__(self) -> None:
        self.times: list[float] = []
        self.lock = threading.Lock()

    def wrap(self, ws: Any) -> None:
        send = ws.send

        def timed(payload: Any, *args: Any, **kwargs: Any) -> Any:
            with self.lock:
                self.times.append(time.monotonic())
            return send(payload, *args, **kwargs)

        ws.send = timed


def _tree(katrain_game_node: Any, move: Any, moves: int) -> tuple[Any, Any]:
    """A game of `moves` moves as KaTrain holds it: its root and last node."""
    root = node = katrain_game_node.GameNode(properties={"SZ": 19, "KM": 6.5, "RU": "japanese"})
    for player, coords in game_moves(moves):
        node = katrain_game_node.GameNode(parent=node, move=move(coords=coords, player=player))
    return root, node


def _settle(engine: Any, seconds: float = 120.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and (engine.queries or not engine.write_queue.empty()):
        time.sleep(0.05)


def _quiet_kivy() -> None:
    """KaTrain imports Kivy: no command line of its own, no console or file log, its home in the temp folder."""
    os.environ.setdefault("KIVY_NO_ARGS", "1")
    os.environ.setdefault("KIVY_NO_CONSOLELOG", "1")
    os.environ.setdefault("KIVY_NO_FILELOG", "1")
    os.environ.setdefault("KIVY_LOG_MODE", "PYTHON")  # else Kivy takes sys.stderr (tracebacks included) for its log
    os.environ.setdefault("KIVY_HOME", str(Path(tempfile.gettempdir()) / "kgbench-bench-kivy-home"))


def run(args: argparse.Namespace) -> list[tuple[str, int, int, int]]:
    _quiet_kivy()
    from katrain.core import constants, game_node, remote_engine
    from pysgf import Move

    class App:
        def __init__(self) -> None:
            self.logs: list[tuple[str, int]] = []
            self.controls = self

        def log(self, message: Any, level: int = 0) -> None:
            self.logs.append((str(message), level))

        def set_status(self, *_: Any, **__: Any) -> None:
            pass

        def __call__(self, *_: Any) -> None:
            pass

    rows: list[tuple[str, int, int, int]] = []
    with hostile_server("shared", hostile_args([])) as (proc, _, _):
        assert proc.url is not None
        app = App()
        config = katrain_config(proc.url.replace("http://", "ws://") + "/ws")
        engine = remote_engine.RemoteKataGoEngine(app, config)
        recorder = _Recorder()
        recorder.wrap(engine.ws)
        try:

            def step(name: str, action: Any) -> None:
                began = len(recorder.times)
                action()
                _settle(engine)
                times = sorted(recorder.times[began:])
                rows.append((name, len(times), busiest(times, 1.0), busiest(times, 0.1)))

            first, _ = _tree(game_node, Move, args.moves)
            second, _ = _tree(game_node, Move, args.moves)
            early = second
            for _ in range(SWEEP_AT):
                early = early.children[0]

            def open_game(root: Any) -> None:
                for node in root.nodes_in_tree:  # Game.analyze_all_nodes
                    node.analyze(engine, priority=constants.PRIORITY_GAME_ANALYSIS, analyze_fast=True)

            def open_two() -> None:
                open_game(first)
                time.sleep(0.2)
                engine.on_new_game()  # KaTrain's new game / load: a terminate per outstanding query
                open_game(second)

            stones = {coords for _, coords in game_moves(SWEEP_AT)}

            def sweep() -> None:  # Game.analyze_extra("sweep"), at move SWEEP_AT: a query per empty point
                for x in range(19):
                    for y in range(19):
                        if (x, y) not in stones:
                            early.analyze(
                                engine,
                                priority=constants.PRIORITY_SWEEP,
                                visits=config["fast_visits"],
                                refine_move=Move(coords=(x, y), player="B"),
                                time_limit=False,
                            )

            def ponder_steps() -> None:
                node = second
                for _ in range(args.steps):
                    node = node.children[0]
                    node.analyze(engine, ponder=True, priority=constants.PRIORITY_EXTRA_ANALYSIS, time_limit=False)
                    time.sleep(KEY_REPEAT_S)
                engine.stop_pondering()

            step(f"open a game of {args.moves} moves, then another at once", open_two)
            step(f"sweep ({361 - len(stones)} points)", sweep)
            step(f"{args.steps} steps with pondering, 30 a second", ponder_steps)
            times = sorted(recorder.times)
            rows.append(("all of it", len(times), busiest(times, 1.0), busiest(times, 0.1)))
            counted = [
                asyncio.run(metric(proc.url, f'kgserve_websocket_paced_messages_total{{bound="{bound}"}}'))
                for bound in ("connection", "client")
            ]
            paced = sum(value for value in counted if not math.isnan(value))  # NaN: never counted
            unnamed = sum(1 for message, _ in app.logs if "Error without ID" in message)
            rows.append(("kgserve read late (paced) / KaTrain's id-less error lines", int(paced), unnamed, 0))
        finally:
            engine.shutdown(finish=False)
    return rows


def render(rows: list[tuple[str, int, int, int]]) -> str:
    head = "| KaTrain | messages | most in 1 s | most in 100 ms |\n|---|---:|---:|---:|\n"
    body = "\n".join(f"| {name} | {count:,} | {second:,} | {tenth:,} |" for name, count, second, tenth in rows[:-1])
    name, paced, unnamed, _ = rows[-1]
    return f"### KaTrain's messages\n\n{machine_line()}\n\n{head}{body}\n\n{name}: {paced} / {unnamed}\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.katrain_traffic", description=__doc__.split("\n")[0])
    p.add_argument("--moves", type=int, default=300, help="moves of each game opened")
    p.add_argument("--steps", type=int, default=60, help="moves stepped through with pondering")
    args = p.parse_args(argv)
    rows = run(args)
    print(render(rows))
    return 0 if rows[-1][1] == 0 and rows[-1][2] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
