"""kgserve starts only on a cfg it can serve as written, and ends on an engine that refuses every start
(issue 45 item 4). Real `python -m kgserve` processes on 127.0.0.1 with the simulated engine (or a real
subprocess that refuses), each bounded in time and stopped."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.kgserve.http.test_cli_startup import assert_one_paragraph, run_kgserve

GOOD = (REPO / "tests/data/katago-reference/analysis.cfg").read_text(encoding="utf-8")


def _cfg(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "serving.cfg"
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ("nnMaxBatchSze = 8\n", ["'nnMaxBatchSze'", "did you mean 'nnMaxBatchSize'"]),
        ("nnMaxBatchSize = abc\n", ["'nnMaxBatchSize'", "could not parse 'abc' as int"]),
        ("numAnalysisThreads = 0\n", ["'numAnalysisThreads'", "range 1 to 16384"]),
        ("maxVisits = 1e2\n", ["'maxVisits'", "as int64"]),
        ("logToStderr = yes\n", ["'logToStderr'", "as bool"]),
        ("nnRandSeed = x\rmaxVisits = 5\n", None),  # one line to KataGo: a free-text seed, maxVisits unchanged
        ("maxVisits = 7\n", ["Key 'maxVisits' + was specified multiple times"]),
        ("just some words\n", ["Could not parse key value pair, line"]),
    ],
    ids=["misspelt", "unparsable", "out-of-range", "int-as-float", "bool", "cr-in-value", "twice", "junk"],
)
def test_a_cfg_katago_would_not_run_as_written_stops_kgserve(
    tmp_path: Path, config_writer: Any, edit: str, named: list[str] | None
) -> None:
    # the reference cfg with one key's line replaced (or, for "twice", the key added again: KataGo refuses that)
    key = edit.split(" ", 1)[0]
    twice = named is not None and "specified multiple" in named[0]
    lines = [line for line in GOOD.splitlines(keepends=True) if twice or not line.startswith(key + " ")]
    cfg = _cfg(tmp_path, "".join(lines) + edit)
    config = config_writer(tmp_path, engine={"cfg": str(cfg)})
    if named is None:  # KataGo reads it fine: no start-up refusal (checked by the cfg check alone, no server)
        from kgserve.katago.cfg import read_cfg
        from kgserve.katago.cfgcheck import cfg_problems

        values = read_cfg(cfg)
        assert values["nnRandSeed"] == "x\rmaxVisits = 5" and values["maxVisits"] == "100"
        assert cfg_problems(values) == []
        return
    result = run_kgserve("--config", str(config), "--port", "0")
    assert result.returncode == 2, result.stderr
    text = assert_one_paragraph(result.stderr)
    assert str(cfg) in text and "engine.cfg" in text
    for part in named:
        assert part in text, text


def test_an_empty_cfg_stops_kgserve_naming_the_missing_keys(tmp_path: Path, config_writer: Any) -> None:
    config = config_writer(tmp_path, engine={"cfg": str(_cfg(tmp_path, "# nothing\n"))})
    result = run_kgserve("--config", str(config), "--port", "0")
    assert result.returncode == 2
    text = assert_one_paragraph(result.stderr)
    assert "'numAnalysisThreads' is missing" in text and "'numSearchThreads' is missing" in text


def readyz(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def exit_status(process: Any, timeout_s: float = 60.0) -> int:
    """Wait for kgserve to end by itself (bounded: killed past `timeout_s`, which fails the test)."""
    try:
        return int(process.proc.wait(timeout=timeout_s))
    except subprocess.TimeoutExpired:
        process.stop(grace_s=5.0)
        raise AssertionError("kgserve did not exit:\n" + process.text()) from None


def test_allow_unknown_cfg_keys_lets_a_newer_katagos_key_through(
    tmp_path: Path, config_writer: Any, kgserve_process: Any
) -> None:
    cfg = _cfg(tmp_path, GOOD + "someV118Key = 3\n")
    config = config_writer(tmp_path, engine={"cfg": str(cfg)})
    refused = run_kgserve("--config", str(config), "--port", "0")
    assert refused.returncode == 2 and "'someV118Key'" in refused.stderr
    process = kgserve_process(config, None, "--allow-unknown-cfg-key", "someV118Key")
    try:
        process.wait_listening()
    finally:
        process.stop()
    allowed = config_writer(tmp_path, engine={"cfg": str(cfg), "allow_unknown_cfg_keys": ["someV118Key"]})
    process = kgserve_process(allowed)
    try:
        process.wait_listening()
    finally:
        process.stop()


# an engine that refuses every start the same way, as KataGo does on a cfg value its build reads and cannot parse
# (its stderr lines timestamped as KataGo's are: the stamps differ from start to start, the error does not)
REFUSING = (
    "import sys, time; "
    "sys.stderr.write(time.strftime('%Y-%m-%d %H:%M:%S+0000') + f': start {time.time()}\\n'); "
    "sys.stderr.write(\"  what():  Could not parse 'abc' as int for key 'nnMaxBatchSize'\\n\"); "
    "sys.exit(1)"
)


def _refusing_config(tmp_path: Path, config_writer: Any, **engine: Any) -> Path:
    return config_writer(
        tmp_path,
        engine={"restart_backoff_initial_s": 0.05, "restart_backoff_max_s": 0.2, **engine},
        **{"engine.backends.sim": {"command": ["{python}", "-c", REFUSING]}},
    )


def test_an_engine_refusing_every_start_ends_kgserve(tmp_path: Path, config_writer: Any, kgserve_process: Any) -> None:
    process = kgserve_process(_refusing_config(tmp_path, config_writer))
    process.wait_listening()
    code = exit_status(process)
    process.stop()  # already ended: joins its log reader
    err = process.text()
    assert code == 3, err
    assert "refused to start 3 times in a row the same way" in err
    assert "Could not parse 'abc' as int for key 'nnMaxBatchSize'" in err and "Traceback" not in err


def test_stay_up_on_engine_refusal_keeps_kgserve_unready(
    tmp_path: Path, config_writer: Any, kgserve_process: Any
) -> None:
    config = _refusing_config(tmp_path, config_writer, stay_up_on_engine_refusal=True)
    process = kgserve_process(config)
    try:
        url = process.wait_listening()
        deadline = time.monotonic() + 60
        status, body = readyz(url)
        while "refused to start" not in (body.get("reason") or "") and time.monotonic() < deadline:
            time.sleep(0.2)
            status, body = readyz(url)
        assert status == 503 and "refused to start 3 times" in body["reason"], body
        assert process.proc.poll() is None  # still up, for a supervisor
    finally:
        code = process.stop()
    assert code == 0
