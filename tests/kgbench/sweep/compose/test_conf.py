"""conf/ composes as documented: groups in override order, KataGo keys at the top level, the user's line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from kgbench.__main__ import CONF_DIR, config_groups, rewrite_overrides
from kgbench.sweep.callbacks import count_jobs, display_overrides
from kgbench.sweep.compose.render import katago_keys, render_cfg


def _compose(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=rewrite_overrides(overrides))


def test_defaults_are_the_cuda_backend_and_a_full_cfg() -> None:
    cfg = _compose([])
    assert cfg.backend == "cuda"
    assert (cfg.mode, cfg.transport, cfg.engines) == ("load", "http", 1)
    keys = katago_keys(cfg)
    for key in (
        "numAnalysisThreads",
        "numSearchThreadsPerAnalysisThread",
        "numNNServerThreadsPerModel",
        "nnMaxBatchSize",
        "nnCacheSizePowerOfTwo",
        "nnMutexPoolSizePowerOfTwo",
        "cudaUseFP16",
        "cudaUseNHWC",
        "maxVisits",
    ):
        assert key in keys, key
    assert cfg.mlflow.experiment is None  # kgbench, or kgbench-sim for a simulated sweep (tracking.experiment_for)
    assert list(cfg.load.concurrency) == [16, 64, 256]
    assert "hparams_search" not in cfg


@pytest.mark.parametrize("backend", ["cuda", "trt", "eigen", "sim"])
def test_every_backend_composes_and_renders(backend: str) -> None:
    cfg = _compose([f"backend={backend}"])
    assert cfg.backend == backend
    rendered = render_cfg(cfg)
    assert f"nnMaxBatchSize = {cfg.nnMaxBatchSize}" in rendered.text


def test_backend_specific_keys_follow_the_backend() -> None:
    trt = katago_keys(_compose(["backend=trt"]))
    assert "trtUseFP16" in trt and "cudaUseFP16" not in trt
    cuda = katago_keys(_compose(["backend=cuda", "cudaUseFP16=false"]))
    assert cuda["cudaUseFP16"] is False and "trtUseFP16" not in cuda


def test_plain_katago_keys_override_groups_and_can_be_added() -> None:
    cfg = _compose(["backend=sim", "nnMaxBatchSize=64", "numAnalysisThreads=8", "nnRandomize=false"])
    keys = katago_keys(cfg)
    assert keys["nnMaxBatchSize"] == 64 and keys["numAnalysisThreads"] == 8 and keys["nnRandomize"] is False


def test_kgbench_keys_and_load_group() -> None:
    cfg = _compose(["transport=direct", "engines=4", "mode=engine", "load=smoke", "load.max_visits=7"])
    assert (cfg.transport, cfg.engines, cfg.mode) == ("direct", 4, "engine")
    assert cfg.load.max_visits == 7 and list(cfg.load.concurrency) == [4, 16]
    assert not {"transport", "engines", "mode", "load", "mlflow", "engine_bench"} & set(katago_keys(cfg))


def test_the_users_line_is_six_jobs_each_composing() -> None:
    line = ["backend=cuda,trt", "nnMaxBatchSize=64,128,256"]
    rewritten = rewrite_overrides(line)
    assert rewritten == ["backend=cuda,trt", "++nnMaxBatchSize=64,128,256"]
    assert count_jobs(rewritten) == 6
    seen = set()
    for override in OverridesParser.create().parse_overrides(rewritten):
        assert override.is_sweep_override()
    for backend in ("cuda", "trt"):
        for batch in (64, 128, 256):
            cfg = _compose([f"backend={backend}", f"nnMaxBatchSize={batch}"])
            seen.add((cfg.backend, cfg.nnMaxBatchSize))
    assert len(seen) == 6
    assert display_overrides(["backend=trt", "++nnMaxBatchSize=64"]) == "backend=trt nnMaxBatchSize=64"


def test_rewrite_leaves_groups_dotted_keys_flags_and_prefixed_overrides_alone() -> None:
    args = ["-m", "load=smoke", "load.concurrency=[1,2]", "hydra.sweep.dir=/tmp/x", "+foo=1", "~bar", "--cfg", "job"]
    assert rewrite_overrides(args) == args
    assert {"backend", "threads", "batch", "cache", "load", "mlflow", "hparams_search", "hydra"} <= config_groups()


def test_group_files_say_what_they_set() -> None:
    for path in Path(CONF_DIR).glob("*/*.yaml"):
        text = path.read_text()
        assert text.lstrip().startswith("#"), f"{path} has no leading comment"
        if path.parent.name in {"threads", "batch", "cache", "backend", "net"}:
            assert "# @package _global_" in text, path


def test_the_net_group_names_the_network_and_the_command_line_still_wins() -> None:
    """`net=NAME` sets engine.model (after config.yaml's own null, before an experiment); `engine.model=` wins."""
    assert _compose([]).engine.model is None  # net=runtime: the runtime config's network, the pinned one
    assert _compose(["net=synthetic-b11c768"]).engine.model == "synthetic:b11c768h12nbt3tflrs-fson-silu"
    assert _compose(["net=synthetic-b40c768nbt"]).engine.model == "synthetic:b40c768nbt"
    assert _compose(["net=katrain"]).engine.model == "katrain"
    assert _compose(["net=zhizi-b40c768nbt"]).engine.model.endswith("kata1-zhizi-b40c768nbt-s11272M-d5935M.bin.gz")
    assert _compose(["net=synthetic-b11c768", "engine.model=/nets/mine.bin.gz"]).engine.model == "/nets/mine.bin.gz"
    assert "net" in config_groups()
    options = {path.stem for path in (Path(CONF_DIR) / "net").glob("*.yaml")}
    assert {"runtime", "synthetic-b11c768", "synthetic-b10c512", "synthetic-b40c768nbt", "katrain"} <= options


def test_optuna_search_config_selects_kgbench_sweeper_with_a_journal() -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["hparams_search=optuna"], return_hydra_config=True)
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_ == "hydra_plugins.kgbench_sweepers.OptunaSweeper"
    assert sweeper.direction == "maximize" and sweeper.n_trials == 20
    assert str(sweeper.journal).endswith(".journal") and sweeper.study_name
    assert sweeper.pruner.name == "median"
    assert "nnMaxBatchSize" in sweeper.params


def test_policy_load_is_bulk_low_visit_with_policy_and_ownership() -> None:
    from kgbench.sweep.modes import _load_settings

    load = _load_settings(_compose(["load=policy"]))
    assert load.max_visits == 1 and min(load.concurrency) >= 256
    assert dict(load.query_fields) == {"includePolicy": True, "includeOwnership": True}
    assert load.as_params()["query_fields"] == '{"includeOwnership":true,"includePolicy":true}'
