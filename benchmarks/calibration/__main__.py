"""``python -m benchmarks.calibration``: the CPU calibration (benchmarks.calibration.cpu)."""

from benchmarks.calibration.cpu import main

raise SystemExit(main())
