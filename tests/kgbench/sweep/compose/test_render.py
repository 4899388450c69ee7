"""kgbench.sweep.compose.render: composed config -> KataGo cfg text, validated before any engine starts."""

from __future__ import annotations

import pytest

from kgbench.sweep.compose.render import (
    RenderError,
    katago_keys,
    render_cfg,
    suggest_key,
    thread_warning,
    validate_keys,
)
from kgserve.katago.cfg import KNOWN_ANALYSIS_KEYS

BASE = {
    "backend": "sim",
    "mode": "load",
    "transport": "http",
    "engines": 1,
    "runtime_config": None,
    "load": {"concurrency": [4]},
    "mlflow": {"experiment": "x"},
    "numAnalysisThreads": 16,
    "numSearchThreadsPerAnalysisThread": 2,
    "nnMaxBatchSize": 32,
    "numNNServerThreadsPerModel": 1,
    "cudaUseFP16": True,
    "trtTransformerNHWC": None,
}


def test_renders_katago_keys_only_in_order() -> None:
    rendered = render_cfg(BASE, home_data_dir="/data/home")
    body = [line for line in rendered.text.splitlines() if not line.startswith("#")]
    assert body == [
        "numAnalysisThreads = 16",
        "numSearchThreadsPerAnalysisThread = 2",
        "nnMaxBatchSize = 32",
        "numNNServerThreadsPerModel = 1",
        "cudaUseFP16 = true",
        "homeDataDir = /data/home",
    ]
    assert rendered.keys["cudaUseFP16"] == "true" and rendered.keys["homeDataDir"] == "/data/home"
    assert rendered.warnings == []


def test_misspelt_key_names_the_closest_valid_one() -> None:
    with pytest.raises(RenderError) as info:
        render_cfg({**BASE, "nnMaxBatchSze": 64})
    message = str(info.value)
    assert "'nnMaxBatchSze'" in message and "did you mean 'nnMaxBatchSize'" in message
    assert "\n" not in message


def test_unknown_key_without_a_close_match() -> None:
    with pytest.raises(RenderError, match="'frobnicate'") as info:
        validate_keys(["frobnicate"])
    assert "did you mean" not in str(info.value)


def test_suggestions_are_case_insensitive() -> None:
    assert suggest_key("nnmaxbatchsize") == "nnMaxBatchSize"
    assert suggest_key("numAnalysisThread") == "numAnalysisThreads"


def test_every_default_key_is_known() -> None:
    from hydra import compose, initialize_config_dir

    from kgbench.__main__ import CONF_DIR

    for backend in ("cuda", "trt", "eigen", "sim"):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[f"backend={backend}", "++trtTransformerNHWC=true"])
        for key in katago_keys(cfg):
            assert key in KNOWN_ANALYSIS_KEYS, (backend, key)


def test_thread_warning_when_threads_cannot_fill_batches() -> None:
    warning = thread_warning({"numAnalysisThreads": 8, "numSearchThreadsPerAnalysisThread": 2, "nnMaxBatchSize": 32})
    assert warning is not None and "16" in warning and "32" in warning
    assert (
        thread_warning({"numAnalysisThreads": 16, "numSearchThreadsPerAnalysisThread": 2, "nnMaxBatchSize": 32}) is None
    )
    assert thread_warning({"numAnalysisThreads": 64, "nnMaxBatchSize": 32, "numNNServerThreadsPerModel": 4})
    assert render_cfg({**BASE, "numAnalysisThreads": 4}).warnings
    assert "GPU underused" in warning
    on_cpu = thread_warning({"numAnalysisThreads": 8, "nnMaxBatchSize": 32}, backend="eigen")
    assert on_cpu is not None and "batches will stay small" in on_cpu and "GPU" not in on_cpu


def test_home_data_dir_from_the_runtime_config_unless_set() -> None:
    assert render_cfg(BASE, home_data_dir="/h").keys["homeDataDir"] == "/h"
    assert render_cfg({**BASE, "homeDataDir": "/mine"}, home_data_dir="/h").keys["homeDataDir"] == "/mine"


def test_lists_and_bad_values() -> None:
    assert render_cfg({**BASE, "avoidSgfPatternDirs": ["a", "b"]}).keys["avoidSgfPatternDirs"] == "a,b"
    # KataGo reads cudaDeviceToUse with getInt: a list is refused at start (per-thread devices have their own keys)
    with pytest.raises(RenderError, match="'cudaDeviceToUse': could not parse '0,1' as int"):
        render_cfg({**BASE, "cudaDeviceToUse": [0, 1]})
    with pytest.raises(RenderError, match="'nnMaxBatchSize': could not parse 'lots' as int"):
        render_cfg({**BASE, "nnMaxBatchSize": "lots"})
    with pytest.raises(RenderError, match="'numAnalysisThreads': '0' is out of KataGo's range 1 to 16384"):
        render_cfg({**BASE, "numAnalysisThreads": 0})
    with pytest.raises(RenderError, match="cannot read"):
        render_cfg({**BASE, "logDir": "a#b"})
    with pytest.raises(RenderError, match="flat list"):
        render_cfg({**BASE, "cudaDeviceToUse": [[0]]})


def test_kgbench_keys_and_mappings_are_never_rendered() -> None:
    keys = katago_keys({**BASE, "engine_bench": {"visits": 3}})
    assert not {"backend", "mode", "transport", "engines", "runtime_config", "load", "mlflow", "engine_bench"} & set(
        keys
    )
    assert "trtTransformerNHWC" not in keys  # null: left out
