"""The bulk policy benchmark's parts: cfg parsing, source-tree environments, the small-batch sims, and an engine-alone
row against the simulated engine (a real subprocess) whose queries are checked for the policy keys."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from kgbench.enginepipe import policyload
from kgbench.enginepipe.policyload import EngineCfg, engine_rows, zero_cost_sims
from tests.conftest import REPO

SIM_MODEL = REPO / "assets" / "sim" / "kgsim-b40c768.bin.gz"


def test_cfg_parse_and_write(tmp_path: Path) -> None:
    cfg = EngineCfg.parse("16:32:1")
    assert cfg == EngineCfg(16, 32, 1) and cfg.label == "16 / 32 / 1"
    text = cfg.write(tmp_path).read_text()
    assert "numAnalysisThreads = 16\n" in text and "nnMaxBatchSize = 32\n" in text
    assert "numNNServerThreadsPerModel = 1\n" in text
    for bad in ("16:32", "16:0:1", "a:b:c", "16:32:1:2"):
        with pytest.raises(argparse.ArgumentTypeError, match="THREADS:BATCH:SERVERS"):
            EngineCfg.parse(bad)


def test_tree_env_puts_the_tree_first() -> None:
    env = policyload._tree_env({"PYTHONPATH": "/site", "X": "1"}, "/tree")
    assert env["PYTHONPATH"] == f"/tree{os.pathsep}/site" and env["X"] == "1"
    assert policyload._tree_env({}, "/tree")["PYTHONPATH"] == "/tree"


def test_zero_cost_sims_use_a_small_batch(tmp_path: Path) -> None:
    settings = zero_cost_sims(3, tmp_path)
    assert settings.engine.processes == 3 and settings.engine.backend == "sim"
    lines = settings.engine.cfg.read_text().splitlines()
    assert "nnMaxBatchSize = 8" in lines and not any(line.startswith("nnMaxBatchSize = 128") for line in lines)


def test_refuses_a_working_folder_that_shadows_the_trees(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(REPO)
    with pytest.raises(SystemExit) as exc:
        policyload.main(["--bin", "x", "--model", "y", "--out", str(tmp_path), "--kgserve", f"t={REPO}"])
    assert exc.value.code == 2


def test_engine_row_sends_policy_queries(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the "binary" copies what it is sent to a file and hands it to the simulated engine
    sent = tmp_path / "sent.jsonl"
    wrapper = tmp_path / "engine.sh"
    wrapper.write_text(f'#!/bin/sh\ntee {sent} | exec {sys.executable} -m kgserve.sim "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("KGSERVE_SIM_FIXED_RPS", "0")
    monkeypatch.setenv("KGSERVE_SIM_STARTUP_S", "0.05")
    monkeypatch.setenv("KGSERVE_SIM_DEVICE", f"policyload-test-{os.getpid()}")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the sim's device state file goes with the test's folder
    rows = engine_rows(wrapper, SIM_MODEL, [(EngineCfg(2, 2, 1), 1)], 12, tmp_path)
    assert len(rows) == 3 and rows[2].startswith("| 2 / 2 / 1 | 1 | 4 | 12 |")
    queries = [json.loads(line) for line in sent.read_text().splitlines()]
    assert len(queries) == 12 and len({q["id"] for q in queries}) == 12
    assert all(q["maxVisits"] == 1 and q["includePolicy"] and q["includeOwnership"] for q in queries)
