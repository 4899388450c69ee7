import sys

from kgserve.batch.cli import main

sys.exit(main())
