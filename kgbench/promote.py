"""`python -m kgbench.promote`: the command; the code is in kgbench/decide/promote.py."""

import sys

from kgbench.decide.promote import main

if __name__ == "__main__":
    sys.exit(main())
