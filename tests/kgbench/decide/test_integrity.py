"""Issue 44, for real: a tag rewritten in a real MLflow store, an artifact edited on disk, two promote processes at
once, a promote killed between its two writes (KGBENCH_TEST_PAUSE_BETWEEN_WRITES), a real kgserve whose runtime cfg
is replaced while it runs and whose engine is then killed."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kgbench.decide import promote as promote_mod
from kgbench.decide.promote import PAUSE_ENV
from kgbench.track.schema import ENGINE_BINARY, ENGINE_MODEL, SERVING_CHANGES
from kgserve.provenance import read_provenance
from kgserve.settings import ConfigError, load_settings
from tests.conftest import REPO, kgserve_ready
from tests.helpers.kgbench_runs import STUB_KATAGO, runtime_config_copy
from tests.helpers.processes import wait_for

from .conftest import Store

OK = {"errors": 0, "timeouts": 0, "p50_ms": 300.0, "p99_ms": 100.0}
SIM_TAGS = {"simulated": "true", "katago_version": "1.17.2-sim"}
CFG = "maxVisits = 500\nnumAnalysisThreads = 2\nnumSearchThreads = 1\n"  # kgserve refuses a cfg KataGo would not start
CFG_PARAMS = {"katago.maxVisits": "500", "katago.numAnalysisThreads": "2", "katago.numSearchThreads": "1"}


def _sim_job(store: Store, sweep: str, name: str, rps: float = 9.0, extra_tags: dict[str, str] | None = None) -> str:
    store.sweep(sweep)
    tags = {**SIM_TAGS, **(extra_tags or {})}
    return store.job(sweep, name, backend="sim", metrics={**OK, "req_per_s": rps}, tags=tags, cfg=CFG,
                     params=CFG_PARAMS)  # fmt: skip


def _promote_argv(store: Store, config: Path, runtime: Path, run_id: str) -> list[str]:
    return [sys.executable, "-m", "kgbench.promote", "--tracking-uri", store.uri, "--config", str(config),
            "--runtime-dir", str(runtime), "--run", run_id, "--allow-simulated"]  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false", **extra}


def _promote(store: Store, config: Path, runtime: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    """promote in this process (its MLflow import paid once): exit status and output as a subprocess's."""
    argv = _promote_argv(store, config, runtime, run_id)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = promote_mod.main(argv[3:])
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def _artifact(store: Store, run_id: str, name: str) -> Path:
    return Path(store.client.get_run(run_id).info.artifact_uri.removeprefix("file://")) / name


def test_a_tag_set_in_the_store_never_becomes_the_engine_or_a_serving_setting(store: Store, tmp_path: Path) -> None:
    config = runtime_config_copy(tmp_path)
    run = _sim_job(store, "s1", "sim")
    evil = tmp_path / "evil.sh"
    evil.write_text(STUB_KATAGO)
    evil.chmod(0o755)
    hostile = '[{"key": "server.host", "runtime": "0.0.0.0", "measured": "127.0.0.1", "why": "x"}, ' \
        '{"key": "limits.max_visits", "runtime": 1000000000000, "measured": 1, "why": "x"}]'  # fmt: skip
    store.client.set_tag(run, ENGINE_BINARY, str(evil))
    store.client.set_tag(run, ENGINE_MODEL, str(evil))
    store.client.set_tag(run, SERVING_CHANGES, hostile)
    runtime = tmp_path / "scratch"
    done = _promote(store, config, runtime, run)
    assert done.returncode == 0, done.stderr
    served = load_settings(runtime / "config.yaml")
    source = load_settings(config)
    assert served.engine.argv_prefix("sim") == source.engine.argv_prefix("sim")  # not the tag's script
    assert served.engine.model_for("sim") == source.engine.model_for("sim")
    assert served.server.host == "127.0.0.1" and served.limits.max_visits == source.limits.max_visits
    assert str(evil) not in (runtime / "config.yaml").read_text()


def test_an_edited_cfg_artifact_is_refused_naming_the_difference(store: Store, tmp_path: Path) -> None:
    config = runtime_config_copy(tmp_path)
    run = _sim_job(store, "s1", "sim")
    _artifact(store, run, "katago.cfg").write_text(
        "maxVisits = 150000\nnumAnalysisThreads = 2\nnumSearchThreads = 1\nmaxVisitz = 1\n"
    )
    runtime = tmp_path / "scratch"
    done = _promote(store, config, runtime, run)
    assert done.returncode == 1
    assert "katago.cfg is not the cfg its job measured" in done.stderr
    assert "maxVisits 500 -> 150000" in done.stderr and "maxVisitz = 1 added" in done.stderr
    assert not runtime.exists() or not (runtime / "katago_serving.cfg").exists()


def test_an_edited_record_is_refused(store: Store, tmp_path: Path) -> None:
    config = runtime_config_copy(tmp_path)
    run = _sim_job(store, "s1", "sim")
    record = _artifact(store, run, "kgbench_record.json")
    record.write_text(record.read_text().replace('"binary": ""', f'"binary": "{tmp_path}/evil"'))
    done = _promote(store, config, tmp_path / "scratch", run)
    assert done.returncode == 1
    assert "kgbench_record.json was changed after its job" in done.stderr


def test_the_katago_a_runtime_runs_is_checked_and_named(store: Store, tmp_path: Path) -> None:
    config = runtime_config_copy(tmp_path)
    katago = tmp_path / "katago"
    katago.write_text(STUB_KATAGO)
    katago.chmod(0o755)
    run = _sim_job(store, "s1", "sim", extra_tags={ENGINE_BINARY: str(katago)})
    done = _promote(store, config, tmp_path / "scratch", run)
    assert done.returncode == 0, done.stderr
    digest = hashlib.sha256(katago.read_bytes()).hexdigest()
    assert f"engine {katago} (sha256 {digest[:12]}, KataGo v1.17.2 (stub))" in done.stdout
    assert load_settings(tmp_path / "scratch" / "config.yaml").engine.argv_prefix("sim") == [str(katago)]
    katago.write_text(STUB_KATAGO + "# swapped\n")  # the file the job measured, replaced since
    again = _promote(store, config, tmp_path / "other", run)
    assert again.returncode == 1
    assert f"{katago} is not the KataGo the job measured" in again.stderr


def _pair_ok(runtime: Path) -> tuple[str | None, str]:
    served = load_settings(runtime / "config.yaml").engine
    data = (runtime / "katago_serving.cfg").read_bytes()
    assert served.cfg_sha256 == hashlib.sha256(data).hexdigest()
    provenance = read_provenance(runtime / "katago_serving.cfg")
    assert provenance is not None and provenance.run_id == served.cfg_run_id
    return served.cfg_run_id, str(served.cfg_sha256)


def test_two_promotes_started_together_leave_one_run_in_both_files(store: Store, tmp_path: Path) -> None:
    config = runtime_config_copy(tmp_path)
    a = _sim_job(store, "a", "a", 9.0)
    b = _sim_job(store, "b", "b", 8.0)
    runtime = tmp_path / "scratch"
    # each pauses between its two writes: without the lock the other's writes would land in that window
    procs = [
        subprocess.Popen(
            _promote_argv(store, config, runtime, run),
            env=_env(**{PAUSE_ENV: "1"}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run in (a, b)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    run_id, _ = _pair_ok(runtime)
    assert run_id in (a, b)


def test_a_promote_killed_between_its_writes_leaves_a_pair_kgserve_and_verify_refuse(
    store: Store, tmp_path: Path
) -> None:
    config = runtime_config_copy(tmp_path)
    a = _sim_job(store, "a", "a")
    b = _sim_job(store, "b", "b")
    runtime = tmp_path / "scratch"
    assert _promote(store, config, runtime, a).returncode == 0
    _pair_ok(runtime)
    proc = subprocess.Popen(_promote_argv(store, config, runtime, b), env=_env(**{PAUSE_ENV: "120"}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while line and "pausing" not in line:
            line = proc.stderr.readline()
        assert "pausing" in line
        proc.send_signal(signal.SIGKILL)  # killed at the moment between the cfg's write and config.yaml's
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)  # reaped, its pipes closed
    assert read_provenance(runtime / "katago_serving.cfg").run_id == b  # type: ignore[union-attr]
    assert load_settings(runtime / "config.yaml").engine.cfg_run_id == a
    served = subprocess.run([sys.executable, "-m", "kgserve", "--config", str(runtime / "config.yaml"), "--port", "0"],
                            env=_env(), capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert served.returncode == 2
    assert "do not belong together" in served.stderr
    assert f"the cfg of run {a}" in served.stderr and f"the cfg there is of {b}" in served.stderr
    verify = subprocess.run([sys.executable, "-m", "kgbench.promote", "--verify", "--runtime-dir", str(runtime),
                             "--tracking-uri", store.uri], env=_env(), capture_output=True, text=True, timeout=120,
                            check=False)  # fmt: skip
    assert verify.returncode == 2 and "do not belong together" in verify.stderr
    assert _promote(store, config, runtime, b).returncode == 0  # promoting again mends it
    _pair_ok(runtime)


def test_a_running_kgserve_restarts_its_engine_on_the_cfg_it_started_with(store: Store, tmp_path: Path) -> None:
    config = runtime_config_copy(tmp_path)
    a = _sim_job(store, "a", "a")
    runtime = tmp_path / "scratch"
    assert _promote(store, config, runtime, a).returncode == 0
    cfg = runtime / "katago_serving.cfg"
    started = cfg.read_bytes()
    data = yaml.safe_load((runtime / "config.yaml").read_text())
    data["engine"]["restart_backoff_initial_s"] = 0.05
    (runtime / "config.yaml").write_text(yaml.safe_dump(data))
    with kgserve_ready(runtime / "config.yaml") as (server, ready):
        assert ready["cfg_sha256"] == hashlib.sha256(started).hexdigest() and ready["cfg_run_id"] == a
        assert ready["cfg"] == str(cfg)
        kept = Path(ready["cfg_kept"])
        assert kept.read_bytes() == started
        cfg.write_text(started.decode().replace("maxVisits = 500", "maxVisits = 150000"))  # behind its back
        (pid,) = [e["pid"] for e in ready["engines"] if e.get("pid")]
        os.kill(pid, signal.SIGKILL)

        def restarted() -> bool:
            _, doc = server.get_json("/readyz")
            pids = [e.get("pid") for e in doc.get("engines", [])]
            return bool(doc.get("ready")) and pid not in pids and any(pids)

        wait_for(restarted, 60, "the engine's restart")
        _, after = server.get_json("/readyz")
        (new_pid,) = [e["pid"] for e in after["engines"] if e.get("pid")]
        argv = Path(f"/proc/{new_pid}/cmdline").read_bytes().split(b"\0")
        assert argv[argv.index(b"-config") + 1].decode() == str(kept)  # the kept copy, not the runtime's file
        assert kept.read_bytes() == started
        assert after["cfg_sha256"] == ready["cfg_sha256"]
    deadline = time.monotonic() + 10
    while kept.parent.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not kept.parent.exists()  # its copy goes with it


@pytest.mark.parametrize(
    ("section", "key", "value", "said"),
    [
        ("server", "auth_token_env", "T[$(touch /tmp/x)]", "is not an environment variable name"),
        ("server", "auth_token_env", "a b", "is not an environment variable name"),
        ("priority", "interactive_token_env", "1TOKEN", "is not an environment variable name"),
        ("server", "host", "127.0.0.1;touch x", "is not an IP address or a host name"),
        ("server", "host", "$(hostname)", "is not an IP address or a host name"),
    ],
)
def test_a_value_a_shell_or_the_environment_reads_is_validated(
    tmp_path: Path, section: str, key: str, value: str, said: str
) -> None:
    config = runtime_config_copy(tmp_path)
    data = yaml.safe_load(config.read_text())
    data.setdefault(section, {})[key] = value
    config.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=re.escape(said)):
        load_settings(config)


def test_a_config_derived_with_another_cfg_is_tied_to_nothing(store: Store, tmp_path: Path) -> None:
    """A job's or a benchmark's kgserve config is made from the runtime's with its own cfg: the runtime's tie must
    not come along (kgserve would refuse every job after a promote in place)."""
    config = runtime_config_copy(tmp_path)
    runtime = tmp_path / "scratch"
    assert _promote(store, config, runtime, _sim_job(store, "a", "a")).returncode == 0
    tied = load_settings(runtime / "config.yaml")
    assert tied.engine.cfg_sha256 is not None and tied.engine.cfg_run_id is not None
    derived = tied.engine.model_copy(update={"cfg": tmp_path / "job.cfg"})
    assert derived.cfg_sha256 is None and derived.cfg_run_id is None
    assert "cfg_sha256" not in tied.model_dump(mode="json")["engine"]
    assert tied.engine.model_copy(update={"processes": 2}).cfg_sha256 == tied.engine.cfg_sha256
