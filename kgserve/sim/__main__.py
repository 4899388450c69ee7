"""`python -m kgserve.sim analysis -config CFG -model MODEL` and `... benchmark -config CFG -model MODEL ...`.

A SIMULATED KataGo: the same protocol and log lines, timings from `kgserve.sim.model.throughput`.
"""

from __future__ import annotations

import sys

from kgserve.sim.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
