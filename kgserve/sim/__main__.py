"""`python -m kgserve.sim analysis -config CFG -model MODEL` / `... benchmark -config CFG -model MODEL -v V -t T -n N`."""

from __future__ import annotations

import sys

from kgserve.sim.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
