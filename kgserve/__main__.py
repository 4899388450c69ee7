"""`python -m kgserve`: see kgserve.cli."""

from kgserve.cli import main

raise SystemExit(main())
