"""What one request line of `benchmarks.dispatch.reviews`' 721-turn batch costs the simulated engine to read: its
720 moves replayed in Python, once per line (`python docs/data/issue33/wait-rule/sim_parse_721.py` from a checkout's
root). Turn by turn, kgserve writes the batch as hundreds of such lines; with the reserve off, as one."""

from __future__ import annotations

import sys
import time

sys.path.insert(0, ".")  # the checkout's benchmarks/ and kgserve/

from benchmarks.dispatch.reviews import game_query
from kgserve.sim.queries import Defaults, parse_query

if __name__ == "__main__":
    body = game_query("batch", 721, 200)
    for turns in ([5], list(range(721))):
        line = dict(body, analyzeTurns=turns)
        started = time.perf_counter()
        for _ in range(5):
            requests = parse_query(line, Defaults(), lambda text: None)
        each = (time.perf_counter() - started) / 5
        moves = len(body["moves"])
        print(f"{moves} moves, analyzeTurns of {len(turns)}: {each * 1000:.1f} ms a line, {len(requests)} turns")
