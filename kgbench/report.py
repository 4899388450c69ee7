"""`python -m kgbench.report`: the command; the code is in kgbench/decide/report.py."""

import sys

from kgbench.decide.report import main

if __name__ == "__main__":
    sys.exit(main())
