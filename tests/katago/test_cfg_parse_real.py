"""kgserve.katago.cfg and cfgcheck against a real KataGo: the line-break rule (a value holding any line break other
than `\\n` is one line to KataGo, so no key is smuggled in) and the value verdicts (each value KataGo starts with
or refuses, kgserve's check judges the same)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.katago_cfg_table import _read_sources, extract_rules
from kgserve.katago import cfg_keys
from kgserve.katago.cfg import ALIASES, LINE_BREAKS, read_cfg
from kgserve.katago.cfgcheck import cfg_problems, value_problem_for
from tests.conftest import REFERENCE
from tests.katago.conftest import RealKatago, tier_config
from tests.kgserve.http.test_cli_startup import run_kgserve
from tests.kgserve.test_cfg_rules import KATAGO_VERDICTS

READY = "Started, ready to begin handling requests"
BASE = (REFERENCE / "analysis.cfg").read_text(encoding="utf-8")


class _Started:
    def __init__(self, stderr: str) -> None:
        self.stderr = stderr


def _start(real_katago: RealKatago, cfg: Path) -> _Started:
    """KataGo started on `cfg` with stdin closed: it gets ready (or refuses) and quits; bounded. Its stderr as
    bytes decoded, without universal newlines (which would turn a CR KataGo logs into a `\n`)."""
    result = subprocess.run(
        [str(real_katago.binary), "analysis", "-config", str(cfg), "-model", str(real_katago.model)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=cfg.parent,
        timeout=120,
        check=False,
    )
    return _Started(result.stderr.decode("utf-8", errors="replace"))


@pytest.mark.katago
@pytest.mark.parametrize("char", sorted(LINE_BREAKS - {"\n"}), ids=lambda c: f"U+{ord(c):04X}")
def test_katago_reads_a_value_with_a_line_break_as_one_line(tmp_path: Path, real_katago: RealKatago, char: str) -> None:
    # were the value split at `char`, KataGo would read numAnalysisThreads twice and refuse the file
    cfg = tmp_path / "smuggle.cfg"
    cfg.write_bytes((BASE + f"nnRandSeed = a{char}numAnalysisThreads = 0\n").encode("utf-8"))
    result = _start(real_katago, cfg)
    assert READY in result.stderr, result.stderr[-2000:]
    assert f"nnRandSeed0 = a{char}numAnalysisThreads = 0" in result.stderr  # KataGo logs the seed it read
    values = read_cfg(cfg)
    assert values["nnRandSeed"] == f"a{char}numAnalysisThreads = 0" and values["numAnalysisThreads"] == "4"
    assert cfg_problems(values) == []


@pytest.mark.katago
def test_a_newline_in_a_value_is_a_second_line_to_both(tmp_path: Path, real_katago: RealKatago) -> None:
    cfg = tmp_path / "newline.cfg"
    cfg.write_text(BASE + "nnRandSeed = a\nnumAnalysisThreads = 0\n")
    result = _start(real_katago, cfg)
    assert READY not in result.stderr and "Key 'numAnalysisThreads' + was specified multiple times" in result.stderr
    with pytest.raises(ValueError, match="specified multiple times"):
        read_cfg(cfg)


@pytest.mark.katago
@pytest.mark.parametrize(("key", "value", "accepted"), KATAGO_VERDICTS)
def test_value_verdicts_match_katago(
    tmp_path: Path, real_katago: RealKatago, key: str, value: str, accepted: bool
) -> None:
    lines = [line for line in BASE.splitlines() if not line.startswith(f"{key} ")]
    cfg = tmp_path / "value.cfg"
    cfg.write_text("\n".join([*lines, f"{key} = {value}"]) + "\n")
    result = _start(real_katago, cfg)
    assert (READY in result.stderr) == accepted, result.stderr[-1500:]
    assert (value_problem_for(key, value) is None) == accepted


@pytest.mark.katago
def test_the_committed_table_is_what_the_source_gives(real_katago: RealKatago) -> None:
    """The release's source tarball, where it lies beside the binary: the generator reproduces cfg_keys.RULES."""
    source = real_katago.binary.parent / f"katago-v{cfg_keys.KATAGO_RULES_VERSION}-cpp-src.tar.gz"
    if not source.is_file():
        pytest.skip(f"no {source.name} beside the KataGo binary")
    rules, _ = extract_rules(_read_sources(source))
    assert rules == cfg_keys.RULES


@pytest.mark.katago
def test_a_real_katago_refusing_every_start_ends_kgserve(tmp_path: Path, real_katago: RealKatago) -> None:
    """`eigenUseFP16 = true` is a valid enabled_t (the cfg check lets it through) that the CPU build refuses on
    every start: kgserve exits 3 naming KataGo's error instead of staying unready for good."""
    config = tier_config(tmp_path, real_katago, cfg={"eigenUseFP16": True})
    result = run_kgserve("--config", str(config), "--port", "0")
    assert result.returncode == 3, result.stderr[-3000:]
    assert "refused to start 3 times in a row the same way" in result.stderr


@pytest.mark.katago
def test_includes_are_read_as_katago_reads_them(tmp_path: Path, real_katago: RealKatago) -> None:
    """Nested `@include`s relative to the including file, a key overridden by an include: KataGo's own echo of the
    keys it read ("Running with following config:") is what kgserve reads."""
    (tmp_path / "sub").mkdir()
    main = tmp_path / "main.cfg"
    base = "".join(line + "\n" for line in BASE.splitlines() if not line.startswith("maxVisits "))
    main.write_text(base + "maxVisits = 100\n@include sub/more.cfg # a comment\n")
    (tmp_path / "sub" / "more.cfg").write_text("maxVisits = 7\n@include 'deeper.cfg'\n")
    (tmp_path / "sub" / "deeper.cfg").write_text('nnRandSeed = "deep # quoted"\n')
    result = _start(real_katago, main)
    assert READY in result.stderr, result.stderr[-1500:]
    echo = result.stderr.split("Running with following config:\n", 1)[1].split("\n\n", 1)[0]
    katago = dict(line.split(" = ", 1) for line in echo.split("\n") if " = " in line)
    # KataGo echoes the keys after applying its alias (numSearchThreadsPerAnalysisThread -> numSearchThreads)
    assert {ALIASES.get(key, key): value for key, value in read_cfg(main).items()} == katago
    assert katago["maxVisits"] == "7" and katago["nnRandSeed"] == "deep # quoted"
