"""A lone client's short searches through the dispatch, answered oldest first: at each of 200 answers, the turns in the
engine, the turns held and the queries held, on 2, 4 and 128 threads. Run from a checkout's root (`python
docs/data/issue33/wait-rule/same_decisions.py`) in two checkouts: the same digest means the same decisions."""

from __future__ import annotations

import hashlib
import json
import sys

sys.path.insert(0, ".")  # the checkout's tests/ (the rule's own rig)

from tests.kgserve.engine.dispatch_rig import Rig


def steps() -> list[tuple[int, int, int, int, int]]:
    out = []
    for threads in (2, 4, 128):
        rig = Rig(threads, 1 / 16, lend_s=2.0)
        rig.learn(0.001)  # 10 visits: 0.01 s, well within the bound
        streams = [rig.submit("a", f"a{index}", visits=10) for index in range(4 * threads)]
        for step in range(200):
            oldest = next(stream for stream in streams if stream.pieces and not stream.done)
            rig.answer(oldest)
            streams.append(rig.submit("a", f"a{4 * threads + step}", visits=10))
            streams = [stream for stream in streams if not stream.done]
            held = sum(1 for stream in streams if stream.held)
            out.append((threads, step, rig.routers[0].load.in_engine, rig.dispatch.queue.turns, held))
    return out


if __name__ == "__main__":
    record = steps()
    print(len(record), hashlib.sha256(json.dumps(record).encode()).hexdigest()[:16])
