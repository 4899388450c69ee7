"""The environment part of a search's measuring condition (kgbench.sweep.search_hooks): the engine and network by
content, the sim's settings but its device's name, the machine (this host, or the PBS nodes a remote launcher asks
for)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from kgbench.sweep.search_hooks import file_identity, measuring_environment
from kgserve.sim.startup import VERSION
from tests.helpers.kgbench_runs import composed


def test_the_sim_is_known_by_its_version_network_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGSERVE_SIM_SPEED", "20")
    monkeypatch.setenv("KGSERVE_SIM_DEVICE", "a-test-device")
    environment, shown = measuring_environment(composed("backend=sim"))
    assert environment["engine"] == f"kgserve.sim {VERSION}" and environment["KGSERVE_SIM_SPEED"] == "20"
    assert "KGSERVE_SIM_DEVICE" not in environment  # names a contention group, not a condition
    assert environment["network"].startswith("sha256:") and shown["network"].endswith(".bin.gz")
    assert environment["machine"]


def test_a_binary_is_known_by_its_content_wherever_it_lies(tmp_path: Path) -> None:
    binary = tmp_path / "katago"
    binary.write_bytes(b"\x7fELF a build")
    copy = tmp_path / "elsewhere" / "katago"
    copy.parent.mkdir()
    shutil.copy(binary, copy)
    cfg = composed("backend=eigen", f"engine.binary={binary}")
    environment, shown = measuring_environment(cfg)
    assert environment["engine"] == file_identity(copy) and shown["engine"] == str(binary)
    binary.write_bytes(b"\x7fELF another build")
    assert measuring_environment(cfg)[0]["engine"] != environment["engine"]
    assert file_identity(tmp_path / "missing") == f"missing: {tmp_path / 'missing'}"


def test_under_pbs_the_machine_is_the_nodes_it_asks_for() -> None:
    plain = OmegaConf.to_container(composed("backend=sim"))
    assert isinstance(plain, dict)
    launcher = {"launcher": {"_target_": "hydra_plugins.kgbench_pbs_launcher.PBSLauncher"}}  # as the sweep has it
    machine = measuring_environment(OmegaConf.create({**plain, "hydra": launcher}))[0]["machine"]
    assert machine.startswith("PBS nodes (select=1:") and "ngpus=" in machine
