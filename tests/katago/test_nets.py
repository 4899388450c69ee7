"""Networks other than the tier's own on the real CPU engine: a tiny synthetic net behind kgserve (random weights,
served only as a throughput test), the synthetic transformers of KataGo v1.17's layouts loaded by the engine itself
(its own parameter count against kgbench.nets'), and the KaTrain net (the katrain extra's b10c384h6nbttflrs, a
transformer), named by one word, `katrain`, on kgserve's command line."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import httpx
import pytest

from kgbench.nets import architecture, describe_model, write_synthetic
from kgserve.katago.netfile import KATRAIN_NET_FILE
from tests.conftest import analysis_query, kgserve_ready
from tests.katago.conftest import RealKatago, tier_config, write_tier_cfg

pytestmark = pytest.mark.katago
needs_katrain = pytest.mark.skipif(importlib.util.find_spec("katrain") is None, reason="the katrain extra is missing")


def test_a_tiny_synthetic_net_loads_and_answers_through_kgserve(tmp_path: Path, real_katago: RealKatago) -> None:
    net = tmp_path / "synthetic-b2c32nbt.bin.gz"
    write_synthetic(architecture("b2c32nbt"), net)
    config = tier_config(tmp_path, real_katago, engine={"model": str(net)})
    with kgserve_ready(config, None, "--throughput-test", timeout_s=120) as (process, ready):
        assert ready["synthetic_net"] is True and ready["throughput_test"] is True
        query = analysis_query("s", moves=[["B", "Q16"]], max_visits=8, includePolicy=True)
        answer = httpx.post(f"{process.url}/analysis", content=json.dumps(query), timeout=120)
    assert answer.status_code == 200, answer.text
    final = [json.loads(line) for line in answer.text.splitlines() if '"isDuringSearch":false' in line]
    assert len(final) == 1 and final[0]["moveInfos"] and len(final[0]["policy"]) == 362
    assert all(p == -1 or 0 <= p <= 1 for p in final[0]["policy"])  # FP32 on the CPU: no NaN, probabilities


# the pinned network's layout and v1.17's medium transformer (a 282 MB and a 114 MB file, ~10 s and ~7 s of loading
# and one evaluation on 2 cores), and a tiny transformer with the same kinds of layer
TRANSFORMERS = [
    pytest.param("b2c32h2nbttflrs", id="tiny"),
    pytest.param("b10c512h8nbt3tflrs-fson-silu-rsnh", id="b10c512", marks=pytest.mark.slow),
    pytest.param("b11c768h12nbt3tflrs-fson-silu", id="b11c768", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("name", TRANSFORMERS)
@pytest.mark.timeout(300)
def test_the_engine_loads_a_synthetic_transformer_counts_its_params_and_answers(
    tmp_path: Path, real_katago: RealKatago, name: str
) -> None:
    net = tmp_path / f"synthetic-{name}.bin"
    write_synthetic(architecture(name), net)
    params = describe_model(net).params
    cfg = write_tier_cfg(tmp_path, {"numAnalysisThreads": 1, "nnMaxBatchSize": 1, "nnCacheSizePowerOfTwo": 10})
    query = analysis_query("t", moves=[["B", "Q16"]], max_visits=2, includePolicy=True)
    done = subprocess.run(
        [str(real_katago.binary), "analysis", "-config", str(cfg), "-model", str(net)],
        input=json.dumps(query) + "\n",
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"Model name: synthetic-{name} (nbt transformer, {params} params)" in done.stderr
    final = [json.loads(line) for line in done.stdout.splitlines() if '"isDuringSearch":false' in line]
    assert len(final) == 1 and final[0]["id"] == "t" and final[0]["moveInfos"], done.stdout[-2000:]
    assert 0.0 <= final[0]["rootInfo"]["winrate"] <= 1.0 and len(final[0]["policy"]) == 362


@needs_katrain
@pytest.mark.katrain
@pytest.mark.timeout(600)
def test_the_katrain_net_answers_through_kgserve_on_the_cpu_build(tmp_path: Path, real_katago: RealKatago) -> None:
    # one search thread per position and tiny batches: a 9.6 GFLOP evaluation takes a CPU core ~0.1-0.5 s
    config = tier_config(tmp_path, real_katago, cfg={"numAnalysisThreads": 2, "nnMaxBatchSize": 2})
    with kgserve_ready(config, None, "--model", "katrain", timeout_s=240) as (process, ready):
        assert ready["model"].endswith(KATRAIN_NET_FILE) and ready["synthetic_net"] is False
        assert process.url is not None
        queries = [
            analysis_query(f"v{visits}", moves=[["B", "Q16"], ["W", "D4"]], max_visits=visits) for visits in (1, 4, 8)
        ]
        body = "\n".join(json.dumps(q) for q in queries)
        answer = httpx.post(f"{process.url}/analysis", content=body, timeout=300)
    assert answer.status_code == 200, answer.text
    lines = [json.loads(line) for line in answer.text.splitlines()]
    by_id = {line["id"]: line for line in lines if not line.get("isDuringSearch")}
    assert sorted(by_id) == ["v1", "v4", "v8"]
    for visits in (1, 4, 8):
        line = by_id[f"v{visits}"]
        assert 1 <= line["rootInfo"]["visits"] <= visits + 1
        assert bool(line["moveInfos"]) == (visits > 1)  # one visit evaluates the root only: no move searched
        assert 0.0 <= line["rootInfo"]["winrate"] <= 1.0


def test_katrain_names_the_extra_when_it_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the katrain package the word `katrain` is a clear configuration error naming the extra."""
    import kgserve.katago.netfile as netfile
    from kgserve.settings import ConfigError, load_settings
    from tests.kgserve.http.conftest import write_config

    monkeypatch.setattr(netfile.importlib.util, "find_spec", lambda name: None)
    config = write_config(tmp_path, engine={"model": "katrain"})
    with pytest.raises(ConfigError, match=r"engine.model: katrain: .*pip install -e '\.\[katrain\]'"):
        load_settings(config)
