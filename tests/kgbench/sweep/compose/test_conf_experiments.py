"""conf/experiment (the real sweeps) and load options derived from load/default.yaml, composed as Hydra does."""

from __future__ import annotations

import itertools

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from kgbench.__main__ import CONF_DIR, rewrite_overrides
from kgbench.sweep.callbacks import count_jobs
from kgbench.sweep.compose.render import katago_keys, render_cfg

EXPERIMENTS = sorted(path.stem for path in (CONF_DIR / "experiment").glob("*.yaml"))


def _compose(overrides: list[str], hydra: bool = False) -> DictConfig:
    """The job's config; with `hydra`, Hydra's own node too (where the sweeper's params are)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=rewrite_overrides(overrides), return_hydra_config=hydra)


def _jobs(cfg: DictConfig, command_line: list[str]) -> list[list[str]]:
    """The jobs Hydra's basic sweeper makes of the experiment's params and a command line, in launch order."""
    lines = [f"{key}={value}" for key, value in cfg.hydra.sweeper.params.items()]
    lines += rewrite_overrides(command_line)
    sweeps: dict[str, list[str]] = {}
    for override in OverridesParser.create().parse_overrides(lines):
        key = override.get_key_element()
        values = list(override.sweep_string_iterator()) if override.is_sweep_override() else [override.value()]
        sweeps[key] = [f"{key}={value}" for value in values]
    return [list(job) for job in itertools.product(*sweeps.values())]


def test_no_experiment_by_default() -> None:
    cfg = _compose([], hydra=True)
    assert "experiment" not in cfg
    assert not cfg.hydra.sweeper.params


def test_h200_is_both_builds_in_the_tensorrt_friendly_order() -> None:
    cfg = _compose(["experiment=h200"], hydra=True)
    params = dict(cfg.hydra.sweeper.params)
    # backend and nnMaxBatchSize first: the keys that rebuild a TensorRT engine vary slowest
    assert list(params) == ["backend", "++nnMaxBatchSize", "++numAnalysisThreads"]
    assert count_jobs(list(cfg.hydra.overrides.task), params) == 12
    jobs = _jobs(cfg, [])
    assert len(jobs) == 12
    builds = [(job[0], job[1]) for job in jobs]
    # each (backend, batch size) build appears as one run of consecutive jobs
    assert len([b for i, b in enumerate(builds) if i == 0 or builds[i - 1] != b]) == len(set(builds)) == 6
    assert {job[0] for job in jobs} == {"backend=cuda", "backend=trt"}


def test_a_command_line_key_replaces_the_experiments_line_in_place() -> None:
    cfg = _compose(["experiment=h200"], hydra=True)
    line = ["nnMaxBatchSize=128,256"]
    assert count_jobs(rewrite_overrides(line), cfg.hydra.sweeper.params) == 8
    jobs = _jobs(cfg, line)
    assert len(jobs) == 8
    assert {job[1] for job in jobs} == {"++nnMaxBatchSize=128", "++nnMaxBatchSize=256"}
    assert all(len(job) == 3 for job in jobs)


@pytest.mark.parametrize("backend", ["cuda", "trt"])
def test_every_h200_job_composes_and_renders(backend: str) -> None:
    for batch, threads in itertools.product((64, 128, 256), (64, 128)):
        job = [f"backend={backend}", f"nnMaxBatchSize={batch}", f"numAnalysisThreads={threads}"]
        cfg = _compose(["experiment=h200", *job])
        keys = katago_keys(cfg)
        assert (cfg.backend, keys["nnMaxBatchSize"], keys["numAnalysisThreads"]) == (backend, batch, threads)
        assert f"nnMaxBatchSize = {batch}" in render_cfg(cfg).text
        assert cfg.mode == "load"


def test_h200_sends_the_batch_clients_traffic_unless_the_command_line_names_a_load() -> None:
    # docs/traffic.md, "experiment=h200's traffic": the node's bulk client by default (issue 40: 512 positions in
    # flight from one client, no maxVisits in the queries: the cfg's), any load option on the command line wins
    cfg = _compose(["experiment=h200"])
    assert (cfg.load.traffic, list(cfg.load.concurrency), cfg.load.max_visits) == ("batch", [512], None)
    assert katago_keys(cfg)["maxVisits"] == 500  # what the batch's queries get, and what promote writes
    assert _compose(["experiment=h200", "load=review"]).load.traffic == "review"
    assert _compose(["experiment=h200", "load=default"]).load.traffic == "distinct"
    assert _compose(["experiment=h200", "load=mixed"]).load.traffic == "mixed"
    assert _compose(["experiment=h200_engine"]).load.traffic == "distinct"  # katago benchmark sends no load


def test_h200_engine_runs_katago_benchmark_on_both_builds() -> None:
    cfg = _compose(["experiment=h200_engine"], hydra=True)
    assert count_jobs([], cfg.hydra.sweeper.params) == 2
    job = _compose(["experiment=h200_engine", "backend=trt"])
    assert job.mode == "engine"  # the experiment wins over conf/config.yaml's own `mode: load`
    assert "mode" not in katago_keys(job) and job.backend == "trt"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_files_open_with_the_command_that_runs_them(name: str) -> None:
    text = (CONF_DIR / "experiment" / f"{name}.yaml").read_text()
    lines = text.splitlines()
    assert lines[0] == "# @package _global_"
    assert lines[1] == f"#   python -m kgbench -m experiment={name}"
    assert yaml.safe_load(text)["hydra"]["sweeper"]["params"]


def test_experiments_are_the_two_h200_sweeps() -> None:
    assert EXPERIMENTS == ["h200", "h200_engine"]


@pytest.mark.parametrize("option", ["smoke", "cpu", "review", "interactive", "mixed"])
def test_load_options_set_only_what_differs_from_default(option: str) -> None:
    default = yaml.safe_load((CONF_DIR / "load" / "default.yaml").read_text())
    data = yaml.safe_load((CONF_DIR / "load" / f"{option}.yaml").read_text())
    assert data.pop("defaults") == ["default", "_self_"]
    assert data, option
    for key, value in data.items():
        assert key in default, key
        assert default[key] != value, f"load/{option}.yaml repeats {key}: {value}"
    composed = _compose([f"load={option}"]).load
    assert set(composed) == set(default)
    assert {key: composed[key] for key in data} == data
    assert {key: composed[key] for key in set(default) - set(data)} == {k: default[k] for k in set(default) - set(data)}


def test_smoke_still_composes_to_its_former_values() -> None:
    load = _compose(["load=smoke"]).load
    assert list(load.concurrency) == [4, 16]
    # windows of 1.5 s since issue 33 (0.5 s windows held ~5 answers at concurrency 4: unstable by counting alone)
    assert (load.mode, load.warmup_s, load.window_s, load.min_windows, load.max_windows) == ("closed", 0.5, 1.5, 3, 6)
    assert (load.tolerance, load.max_visits, load.request_timeout_s, load.seed) == (0.25, 20, 30.0, 0)
    assert (load.rate, load.max_loop_lag_ms, load.max_cpu_share) == (50.0, 200.0, 0.95)
