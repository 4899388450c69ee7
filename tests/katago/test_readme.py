"""The README's "On a real KataGo" section, as printed, in a fresh clone, on the real CPU KataGo: a sweep of the build
and network named on the command line, a plain promote refused (it would cross runtimes; nothing written), promote
into the sweep's own runtime, and kgserve serving it. The section's `export` line is the tier's own two variables."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO, kgserve_ready
from tests.helpers.clone import clone_working_tree, git_status
from tests.helpers.readme import bash_block, readme_env, run_step, serve_args
from tests.katago.conftest import BIN_ENV, MODEL_ENV, RealKatago

pytestmark = [pytest.mark.katago, pytest.mark.slow]

SAMPLE = "tsumego_straight3_9x9"


@pytest.mark.timeout(1200)  # a two-job CPU sweep on busy shared cores, a promote, a kgserve start
def test_the_readme_on_a_real_katago(tmp_path: Path, real_katago: RealKatago) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    lines = bash_block(REPO / "README.md", "On a real KataGo")
    exports = [line for line in lines if line.startswith("export ")]
    assert [sorted(part.split("=", 1)[0] for part in line.split()[1:]) for line in exports] == [[BIN_ENV, MODEL_ENV]]
    sweep_step, promote_step, serve_step = [line for line in lines if line not in exports]
    clone = clone_working_tree(tmp_path / "clone")
    env = readme_env(clone, tmp_path / "bin", **{BIN_ENV: str(real_katago.binary), MODEL_ENV: str(real_katago.model)})

    # as printed, but a race of the two jobs (on for real engines) bounded to one round: the suite's time
    sweep = run_step(f"{sweep_step} race.max_rounds=1", env, clone, timeout=900)
    out = sweep.stdout + sweep.stderr
    assert re.search(r"kgbench sweep: (2|4) job\(s\), sorted by req/s", out), out[-3000:]
    assert "promote it: python -m kgbench.promote --runtime-dir runtime/eigen" in out, out[-3000:]

    plain = subprocess.run(["bash", "-c", "python -m kgbench.promote"], cwd=clone, env=env, capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert plain.returncode == 1, plain.stdout + plain.stderr
    assert "promote will not cross runtimes: runtime/config.yaml serves cuda (GPU)" in plain.stderr
    assert "eigen (CPU)" in plain.stderr and "Nothing written" in plain.stderr
    assert git_status(clone) == ""  # the tracked GPU runtime untouched

    promoted = run_step(promote_step, env, clone, timeout=300).stdout
    assert promoted.startswith("promoted run ") and "eigen nnMaxBatchSize=" in promoted, promoted
    config, args = serve_args(serve_step)
    sample = json.loads((clone / "assets" / "analysis" / "inputs" / f"{SAMPLE}.json").read_text())
    with kgserve_ready(config, env, *args, cwd=clone, log_dir=tmp_path) as (process, ready):
        assert ready["backend"] == "eigen" and ready["simulated"] is False
        assert ready["provenance"]["run_id"] and ready["provenance"]["modified"] is False
        request = urllib.request.Request(str(process.url) + "/analysis", data=json.dumps(sample).encode())
        with urllib.request.urlopen(request, timeout=120) as response:
            assert response.status == 200
            (line,) = [json.loads(raw) for raw in response.read().splitlines()]
        assert line["id"] == SAMPLE and line["rootInfo"]["visits"] == sample["maxVisits"]
    assert git_status(clone) == ""
