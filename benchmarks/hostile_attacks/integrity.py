"""Issue 44's attacks on the pipeline's integrity, replayed: sweep -> MLflow store -> promote -> runtime -> kgserve.

``python -m benchmarks.hostile_attacks.integrity [--only NAME ...] [--rounds N]``

An operator who may write to the tracking store (or to the runtime folder) tries what the issue found: a tag that
becomes the engine binary or a serving setting, a config value that reaches a shell, an artifact edited after the
sweep, the KataGo swapped, two promotes at once, a promote killed between its two writes, a cfg replaced behind a
running kgserve, a fetch name that is a path. Everything is real: a sqlite MLflow store in a temporary folder, runs
planted as a kgbench job records them (kgbench.track.record), `python -m kgbench.promote` and `python -m kgserve`
(the simulated engine) as subprocesses on 127.0.0.1. One line per attack: held or BROKEN, and why. Exit status 0
only when every attack held.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from mlflow.tracking import MlflowClient

from kgbench.decide.promote import PAUSE_ENV
from kgbench.targets.kgserve_process import KgserveProcess
from kgbench.track.record import RECORD_ARTIFACT, JobRecord, file_sha256, log_job_record
from kgbench.track.schema import ENGINE_BINARY, SERVING_CHANGES
from kgserve.paths import PROJECT_ROOT
from kgserve.provenance import read_provenance
from kgserve.settings import ConfigError, load_settings

CFG = "maxVisits = 500\nnumAnalysisThreads = 2\n"
STAND_IN = '#!/bin/sh\nif [ "$1" = version ]; then echo "KataGo v1.17.2 (stand-in)"; exit 0; fi\nexit 1\n'
HOSTILE_CHANGES = [
    {"key": "server.host", "runtime": "0.0.0.0", "measured": "127.0.0.1", "why": "x"},
    {"key": "limits.max_visits", "runtime": 10**12, "measured": 1, "why": "x"},
    {"key": "server.auth_token_env", "runtime": "T[$(touch PWNED)]", "measured": None, "why": "x"},
]


@dataclass
class Lab:
    """A temporary store, a runtime config of the sim, and how to run promote and kgserve against them."""

    root: Path
    client: MlflowClient
    uri: str
    experiment: str
    config: Path

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
                **extra}  # fmt: skip

    def job(self, name: str, *, binary: str = "") -> str:
        """A finished sim job as kgbench records one: params, metrics, its cfg and its integrity record."""
        run = self.client.create_run(self.experiment, run_name=name, tags={
            "kgbench.role": "job", "kgbench.sweep_id": name, "backend": "sim", "simulated": "true",
            "katago_version": "1.17.2-sim", "kgbench.status": "ok", "kgbench.unstable": "false",
            "kgbench.invalid": "false"})  # fmt: skip
        run_id = run.info.run_id
        for key, value in {"backend": "sim", "katago.maxVisits": "500", "katago.numAnalysisThreads": "2"}.items():
            self.client.log_param(run_id, key, value)
        for key, number in {"req_per_s": 9.0, "errors": 0, "timeouts": 0, "p50_ms": 100.0, "p99_ms": 200.0}.items():
            self.client.log_metric(run_id, key, number)
        folder = self.root / "jobs" / run_id
        folder.mkdir(parents=True)
        (folder / "katago.cfg").write_text(CFG)
        record = JobRecord(file_sha256(folder / "katago.cfg"), binary, file_sha256(binary) if binary else "")
        self.client.log_artifact(run_id, str(folder / "katago.cfg"))
        log_job_record(self.client, run_id, record, folder)
        self.client.set_terminated(run_id, "FINISHED")
        return run_id

    def artifact(self, run_id: str, name: str) -> Path:
        return Path(self.client.get_run(run_id).info.artifact_uri.removeprefix("file://")) / name

    def promote_argv(self, run_id: str, runtime: Path) -> list[str]:
        return [sys.executable, "-m", "kgbench.promote", "--tracking-uri", self.uri, "--config", str(self.config),
                "--runtime-dir", str(runtime), "--run", run_id, "--allow-simulated"]  # fmt: skip

    def promote(self, run_id: str, runtime: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.promote_argv(run_id, runtime), env=self.env(), capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip


def _lab(root: Path) -> Lab:
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("kgbench-sim", artifact_location=(root / "mlruns").as_uri())
    data: Any = yaml.safe_load((PROJECT_ROOT / "runtime" / "config.yaml").read_text())
    data["server"]["port"] = 0
    data["engine"]["home_data_dir"] = str(root / "katago_home")
    data["engine"]["restart_backoff_initial_s"] = 0.05
    sim_model = data["engine"]["backends"]["sim"]["model"]
    data["engine"]["backends"]["sim"]["model"] = str((PROJECT_ROOT / "runtime" / sim_model).resolve())
    config = root / "runtime" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump(data))
    return Lab(root, client, uri, experiment, config)


def _held(ok: bool, detail: str) -> tuple[bool, str]:
    return ok, detail


def tag_engine_binary(lab: Lab) -> tuple[bool, str]:
    run = lab.job("tag-binary")
    script = lab.root / "attacker.sh"
    script.write_text(STAND_IN)
    script.chmod(0o755)
    lab.client.set_tag(run, ENGINE_BINARY, str(script))
    done = lab.promote(run, lab.root / "rt-tag-binary")
    written = (lab.root / "rt-tag-binary" / "config.yaml").read_text() if done.returncode == 0 else ""
    return _held(
        done.returncode == 0 and str(script) not in written,
        f"promote exit {done.returncode}; the attacker's script in config.yaml: {str(script) in written}",
    )


def tag_serving_changes(lab: Lab) -> tuple[bool, str]:
    run = lab.job("tag-serving")
    lab.client.set_tag(run, SERVING_CHANGES, json.dumps(HOSTILE_CHANGES))
    done = lab.promote(run, lab.root / "rt-tag-serving")
    if done.returncode != 0:
        return False, f"promote exit {done.returncode}: {done.stderr.strip()[-200:]}"
    served = load_settings(lab.root / "rt-tag-serving" / "config.yaml")
    ok = served.server.host == "127.0.0.1" and served.limits.max_visits < 10**12 and not served.server.auth_token_env
    return ok, f"served host {served.server.host}, max_visits {served.limits.max_visits}, " \
        f"auth_token_env {served.server.auth_token_env}"  # fmt: skip


def config_value_to_shell(lab: Lab) -> tuple[bool, str]:
    witness = lab.root / "PWNED"
    data: Any = yaml.safe_load(lab.config.read_text())
    data["server"]["auth_token_env"] = f"T[$(touch {witness})]"
    hostile = lab.root / "hostile-config.yaml"
    hostile.write_text(yaml.safe_dump(data))
    script = PROJECT_ROOT / "runtime" / "serve_analysis.sh"
    done = subprocess.run([str(script), "--config", str(hostile), "x.json"], env=lab.env(T="x"),
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    return _held(
        done.returncode != 0 and not witness.exists(),
        f"serve_analysis.sh exit {done.returncode}, command run: {witness.exists()}",
    )


def edited_cfg_artifact(lab: Lab) -> tuple[bool, str]:
    run = lab.job("edited-cfg")
    lab.artifact(run, "katago.cfg").write_text("maxVisits = 150000\nnumAnalysisThreads = 2\nmaxVisitz = 1\n")
    done = lab.promote(run, lab.root / "rt-edited-cfg")
    named = "maxVisits 500 -> 150000" in done.stderr
    return _held(done.returncode == 1 and named, f"promote exit {done.returncode}, difference named: {named}")


def edited_record(lab: Lab) -> tuple[bool, str]:
    run = lab.job("edited-record")
    path = lab.artifact(run, RECORD_ARTIFACT)
    path.write_text(path.read_text().replace('"binary": ""', '"binary": "/tmp/attacker"'))
    done = lab.promote(run, lab.root / "rt-edited-record")
    return _held(done.returncode == 1, f"promote exit {done.returncode}")


def swapped_katago(lab: Lab) -> tuple[bool, str]:
    katago = lab.root / "katago"
    katago.write_text(STAND_IN)
    katago.chmod(0o755)
    run = lab.job("swapped-katago", binary=str(katago))
    katago.write_text(STAND_IN + "# the attacker's now\n")
    done = lab.promote(run, lab.root / "rt-swapped")
    return _held(done.returncode == 1 and "is not the KataGo the job measured" in done.stderr,
                 f"promote exit {done.returncode}")  # fmt: skip


def _pair_problem(runtime: Path) -> str | None:
    served = load_settings(runtime / "config.yaml").engine
    actual = hashlib.sha256((runtime / "katago_serving.cfg").read_bytes()).hexdigest()
    provenance = read_provenance(runtime / "katago_serving.cfg")
    theirs = provenance.run_id if provenance is not None else None
    if served.cfg_sha256 != actual or served.cfg_run_id != theirs:
        return f"config.yaml names {served.cfg_run_id}, the cfg is {theirs}"
    return None


def concurrent_promotes(lab: Lab, rounds: int) -> tuple[bool, str]:
    a, b = lab.job("race-a"), lab.job("race-b")
    runtime = lab.root / "rt-race"
    mixed = 0
    for _ in range(rounds):
        procs = [subprocess.Popen(lab.promote_argv(run, runtime), env=lab.env(**{PAUSE_ENV: "0.5"}),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for run in (a, b)]  # fmt: skip
        codes = [p.wait(300) for p in procs]
        if codes != [0, 0] or _pair_problem(runtime):
            mixed += 1
    return mixed == 0, f"{rounds} rounds of two promotes at once: {mixed} left a mixed or failed runtime"


def killed_between_writes(lab: Lab) -> tuple[bool, str]:
    a, b = lab.job("kill-a"), lab.job("kill-b")
    runtime = lab.root / "rt-killed"
    lab.promote(a, runtime)
    proc = subprocess.Popen(lab.promote_argv(b, runtime), env=lab.env(**{PAUSE_ENV: "120"}),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stderr is not None
    while (line := proc.stderr.readline()) and "pausing" not in line:
        pass
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    served = subprocess.run([sys.executable, "-m", "kgserve", "--config", str(runtime / "config.yaml"),
                             "--port", "0"], env=lab.env(), capture_output=True, text=True, timeout=120,
                            check=False)  # fmt: skip
    refused = served.returncode == 2 and "do not belong together" in served.stderr
    return refused, f"pair after the kill: {_pair_problem(runtime)}; kgserve exit {served.returncode}"


def cfg_behind_running_kgserve(lab: Lab) -> tuple[bool, str]:
    run = lab.job("restart")
    runtime = lab.root / "rt-restart"
    lab.promote(run, runtime)
    cfg = runtime / "katago_serving.cfg"
    started = cfg.read_bytes()
    server = KgserveProcess(runtime / "config.yaml", lab.root / "kgserve-restart.log", lab.env())
    server.start()
    try:
        server.wait_listening(120)
        _, ready = server.wait_ready(120)
        cfg.write_text(started.decode().replace("maxVisits = 500", "maxVisits = 150000"))
        (pid,) = [e["pid"] for e in ready["engines"] if e.get("pid")]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, doc = server.get_json("/readyz")
            pids = [e.get("pid") for e in doc.get("engines", []) if e.get("pid")]
            if doc.get("ready") and pids and pid not in pids:
                argv = Path(f"/proc/{pids[0]}/cmdline").read_bytes().split(b"\0")
                runs = Path(argv[argv.index(b"-config") + 1].decode()).read_bytes()
                return runs == started, f"the restarted engine runs the cfg kgserve started with: {runs == started}"
            time.sleep(0.2)
        return False, "the engine did not restart within 60 s"
    finally:
        server.stop(10)


def fetch_name_is_a_path(lab: Lab) -> tuple[bool, str]:
    data: Any = yaml.safe_load((PROJECT_ROOT / "runtime" / "config.yaml").read_text())
    data["release"]["network"]["name"] = "../../victim.txt"
    path = lab.root / "fetch-config.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        load_settings(path)
    except ConfigError as exc:
        return True, f"refused: {str(exc).splitlines()[-1].strip()[:100]}"
    return False, "a path out of runtime/models/ was accepted"


def _attacks(rounds: int) -> dict[str, Callable[[Lab], tuple[bool, str]]]:
    return {
        "tag-engine-binary": tag_engine_binary,
        "tag-serving-changes": tag_serving_changes,
        "config-value-to-shell": config_value_to_shell,
        "edited-cfg-artifact": edited_cfg_artifact,
        "edited-record": edited_record,
        "swapped-katago": swapped_katago,
        "concurrent-promotes": lambda lab: concurrent_promotes(lab, rounds),
        "killed-between-writes": killed_between_writes,
        "cfg-behind-running-kgserve": cfg_behind_running_kgserve,
        "fetch-name-is-a-path": fetch_name_is_a_path,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile_attacks.integrity",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    attacks = _attacks(4)
    parser.add_argument("--only", nargs="+", choices=sorted(attacks), default=None)
    parser.add_argument("--rounds", type=int, default=4, help="rounds of two promotes at once (default 4)")
    args = parser.parse_args(argv)
    attacks = _attacks(args.rounds)
    broken = 0
    with tempfile.TemporaryDirectory(prefix="kgbench-integrity-") as tmp:
        lab = _lab(Path(tmp))
        for name in args.only or list(attacks):
            started = time.monotonic()
            try:
                held, detail = attacks[name](lab)
            except Exception as exc:  # an attack that cannot run is not a held one
                held, detail = False, f"{type(exc).__name__}: {exc}"
            broken += not held
            print(f"{name:28} {'held' if held else 'BROKEN':7} {time.monotonic() - started:5.1f}s  {detail}",
                  flush=True)  # fmt: skip
    print(f"{len(args.only or attacks) - broken} held, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
