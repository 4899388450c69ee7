"""Pure helpers of the serving benchmark suite."""

from __future__ import annotations

from pathlib import Path

from benchmarks.serving import cfg_with, parse_args
from kgbench.load.traffic import ShapedSource


def test_cfg_with_replaces_and_appends(tmp_path: Path) -> None:
    base = tmp_path / "a.cfg"
    base.write_text("# c\nnnMaxBatchSize = 128\nmaxVisits = 500\n")
    out = cfg_with(base, {"nnMaxBatchSize": 8, "numNNServerThreadsPerModel": 1}, tmp_path / "")
    text = out.read_text()
    assert "nnMaxBatchSize = 8\n" in text and "128" not in text
    assert "numNNServerThreadsPerModel = 1" in text and "maxVisits = 500" in text
    assert base.read_text().count("128") == 1  # the original is untouched


def test_shaped_source_replaces_include_flags() -> None:
    src = ShapedSource({"includeOwnership": True}, seed=2)
    bodies = [src.next()[1] for _ in range(50)]
    assert all(b["includeOwnership"] is True for b in bodies)
    assert not any("includePolicy" in b or "includePVVisits" in b for b in bodies)
    assert src.repeat_rate() == 0.0 and src.size == 13400


def test_default_suite_arguments() -> None:
    args = parse_args([])
    assert args.rates == [100.0, 500.0, 2000.0] and args.pool == [1, 2, 4] and not args.quick
