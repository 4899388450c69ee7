"""runtime/serve_analysis.sh through a pseudo-terminal: prompt, basename, output file, curl hint, server lifetime."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kgserve.settings import DEFAULT_CONFIG_PATH, Settings, load_settings

from .conftest import REPO, RUNTIME, Stubs
from .ptyproc import PtyProcess

SERVE = str(RUNTIME / "serve_analysis.sh")
SAMPLES = REPO / "assets" / "analysis"


def _config_with_port(tmp_path: Path, port: int) -> Path:
    runtime = tmp_path / "runtime"
    runtime.mkdir(exist_ok=True)
    text = DEFAULT_CONFIG_PATH.read_text(encoding="utf-8")
    # server.port: the first `  port:` line, inside the server section (the balancer section has its own)
    text, count = re.subn(r"(?m)^(server:\n(?:  .*\n)*?)  port: \d+", rf"\g<1>  port: {port}", text, count=1)
    assert count == 1
    text = text.replace("../assets/sim/", f"{REPO}/assets/sim/")
    (runtime / "katago_serving.cfg").write_text((RUNTIME / "katago_serving.cfg").read_text(), encoding="utf-8")
    path = runtime / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KG_", "PBS_"))}
    env.update(TERM="dumb", KG_PYTHON=str(Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin" / "python"))
    return env


def _sample(stem: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SAMPLES / "outputs" / f"{stem}.jsonl").read_text().splitlines()]


class FakeKgserve(BaseHTTPRequestHandler):
    """Answers like kgserve: one final line per analysed turn, with the caller's id."""

    readyz_calls = 0
    posts: list[bytes] = []
    serves: dict[str, Any] = {}  # what its /readyz says it serves (backend, simulated, model)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _reply(self, code: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._reply(200, b'{"status":"alive"}')
        elif self.path == "/readyz":
            type(self).readyz_calls += 1
            ready = type(self).readyz_calls > 2
            self._reply(
                200 if ready else 503,
                json.dumps({"ready": ready, "reason": None if ready else "starting", **type(self).serves}).encode(),
            )
        else:
            self._reply(404, b"{}")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).posts.append(body)
        query = json.loads(body)
        turns = query.get("analyzeTurns") or [len(query.get("moves", []))]
        lines = [json.dumps({"id": query["id"], "isDuringSearch": False, "turnNumber": t}) for t in turns]
        self._reply(200, ("\n".join(lines) + "\n").encode(), "application/x-ndjson")


@pytest.fixture
def fake_server() -> Iterator[int]:
    FakeKgserve.readyz_calls = 0
    FakeKgserve.posts = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeKgserve)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _serves(config: Path) -> dict[str, Any]:
    """What a kgserve of `config` says it serves on /readyz."""
    engine = load_settings(config).engine
    return {"backend": engine.backend, "simulated": engine.backend == "sim", "model": str(engine.model_for())}


def test_interactive_loop_against_a_server_it_did_not_start(tmp_path: Path, fake_server: int) -> None:
    config = _config_with_port(tmp_path, fake_server)
    FakeKgserve.serves = _serves(config)
    out = tmp_path / "out"
    out.mkdir()
    child = PtyProcess([SERVE, "--config", str(config), "-o", str(out)], env=_env(), cwd=REPO)
    try:
        child.expect(f"something already answers on http://127.0.0.1:{fake_server}")
        child.expect("ready after")
        listing = child.expect(
            r"inputs in assets/analysis/inputs:\n((?:  .*\n)+)input basename \(empty line to quit\): "
        )
        assert listing.group(1).split() == sorted(p.name for p in (SAMPLES / "inputs").iterdir())
        child.send_line("lategame_19x19")
        child.expect(r"wrote 3 line\(s\) to " + re.escape(str(out / "lategame_19x19.jsonl")))
        hint = child.expect(r"same-node equivalent:\n  (curl .*)\n").group(1)
        assert f"@assets/analysis/inputs/lategame_19x19.json http://127.0.0.1:{fake_server}/analysis" in hint
        child.expect("input basename")
        child.send_line("lategame_19x19.json")  # again: the output exists -> asked, default no
        child.expect(r"exists; overwrite\? \[y/N\] ")
        child.send_line("")
        child.expect("left .* as it was")
        child.expect("input basename")
        child.send_line("no_such_input")
        child.expect("no input 'no_such_input'")
        child.expect("input basename")
        child.send_line("")
        assert child.wait(30) == 0
    finally:
        child.close()
    lines = [json.loads(line) for line in (out / "lategame_19x19.jsonl").read_text().splitlines()]
    expected = _sample("lategame_19x19")
    assert len(lines) == len(expected) == 3
    assert {d["id"] for d in lines} == {d["id"] for d in expected} == {"lategame_19x19"}
    assert len(FakeKgserve.posts) == 1
    assert json.loads(FakeKgserve.posts[0]) == json.loads((SAMPLES / "inputs" / "lategame_19x19.json").read_text())
    with socket.create_connection(("127.0.0.1", fake_server), timeout=5):
        pass  # the server it did not start is still up


def test_one_file_mode_without_a_terminal(tmp_path: Path, fake_server: int) -> None:
    config = _config_with_port(tmp_path, fake_server)
    FakeKgserve.serves = _serves(config)
    target = tmp_path / "one.jsonl"
    argv = [SERVE, "--config", str(config), "-o", str(target), "tsumego_straight3_9x9.json"]
    run = subprocess.run(
        argv, env=_env(), cwd=REPO, capture_output=True, text=True, timeout=60, start_new_session=True, check=False
    )
    assert run.returncode == 0, run.stderr
    assert [json.loads(line)["id"] for line in target.read_text().splitlines()] == ["tsumego_straight3_9x9"]
    assert "same-node equivalent" in run.stdout
    again = subprocess.run(
        argv, env=_env(), cwd=REPO, capture_output=True, text=True, timeout=60, start_new_session=True, check=False
    )
    assert again.returncode == 1
    assert "pass -y to overwrite" in again.stderr
    forced = subprocess.run(
        [*argv, "-y"],
        env=_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
        check=False,
    )
    assert forced.returncode == 0, forced.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_serve_analysis_starts_kgserve_sim_answers_and_stops_it(tmp_path: Path) -> None:
    port = _free_port()
    config = _config_with_port(tmp_path, port)
    out = tmp_path / "out"
    out.mkdir()
    env = {**_env(), "KGSERVE_SIM_SPEED": "50", "KGSERVE_SIM_DEVICE": "private"}
    child = PtyProcess([SERVE, "--config", str(config), "--backend", "sim", "-o", str(out)], env=env, cwd=REPO)
    try:
        child.expect(f"starting kgserve \\(backend sim, 127.0.0.1:{port}\\)", timeout=30)
        child.expect("ready after", timeout=150)
        child.expect("input basename \\(empty line to quit\\): ", timeout=30)
        child.send_line("lategame_19x19.json")
        child.expect(r"wrote (\d+) line\(s\)", timeout=120)
        child.expect(f"http://127.0.0.1:{port}/analysis")
        child.expect("input basename", timeout=30)
        child.send_line("")
        child.expect("stopping the kgserve this script started", timeout=30)
        assert child.wait(90) == 0
    finally:
        if child.proc.poll() is None:
            os.killpg(child.proc.pid, signal.SIGTERM)
        child.close()
    lines = [json.loads(line) for line in (out / "lategame_19x19.jsonl").read_text().splitlines()]
    expected = _sample("lategame_19x19")
    assert len(lines) == len(expected)
    assert [d["id"] for d in lines] == [d["id"] for d in expected]
    assert sorted(d["turnNumber"] for d in lines) == sorted(d["turnNumber"] for d in expected)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # the server it started is gone


def test_the_port_comes_from_config_yaml_and_a_running_server_is_reused(
    stubs: Stubs, shipped: Settings, tmp_path: Path
) -> None:
    """Shipped runtime/config.yaml, stub curl playing a server that already answers: no kgserve is started."""
    target = tmp_path / "mid.jsonl"
    readyz = json.dumps({"ready": True, **_serves(DEFAULT_CONFIG_PATH)})
    run = stubs.run(
        [SERVE, "-o", str(target), "midgame_19x19"], extra_env={"STUB_HTTP_CODE": "200", "STUB_READYZ": readyz}
    )
    assert run.returncode == 0, run.stderr
    base = f"http://127.0.0.1:{shipped.server.port}"
    urls = [next(a for a in c["args"] if a.startswith("http")) for c in stubs.calls("curl")]
    assert urls == [f"{base}/healthz", f"{base}/readyz", f"{base}/analysis"]
    assert "starting kgserve" not in run.stderr and "already answers" in run.stderr
    assert f"{base}/analysis" in run.stdout
    assert json.loads(target.read_text())["id"] == "stub"


@pytest.mark.slow
def test_interrupting_the_script_stops_the_server_it_started(tmp_path: Path) -> None:
    port = _free_port()
    config = _config_with_port(tmp_path, port)
    env = {**_env(), "KGSERVE_SIM_SPEED": "50", "KGSERVE_SIM_DEVICE": "private"}
    child = PtyProcess([SERVE, "--config", str(config), "--backend", "sim"], env=env, cwd=REPO)
    try:
        child.expect("input basename", timeout=150)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # up while the script waits at the prompt
        # bash defers a trap whose signal lands between read's prompt and its read(2) until input comes: on a busy
        # machine that gap can take the first signal, so it is sent again (the trap exits: it runs once)
        for attempt in range(6):
            time.sleep(1)
            child.proc.send_signal(signal.SIGINT)
            try:
                child.expect("stopping the kgserve this script started", timeout=5)
                break
            except AssertionError:
                if attempt == 5:
                    raise
        assert child.wait(90) == 130
    finally:
        child.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_a_server_on_the_port_that_is_not_the_configured_backend_is_named_and_refused(
    tmp_path: Path, fake_server: int
) -> None:
    """A simulated kgserve left on the port does not answer for the configured real engine (issue 44)."""
    config = _config_with_port(tmp_path, fake_server)
    FakeKgserve.serves = {"backend": "sim", "simulated": True, "model": "/elsewhere/sim.bin.gz"}
    target = tmp_path / "one.jsonl"
    argv = [SERVE, "--config", str(config), "-o", str(target), "tsumego_straight3_9x9.json"]
    run = subprocess.run(argv, env=_env(), cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 1
    want = _serves(config)
    assert (
        f"the server already on http://127.0.0.1:{fake_server} serves sim (simulated) with /elsewhere/sim.bin.gz, "
        f"not the configured {want['backend']} (real) with {want['model']}" in run.stderr
    )
    assert "--use-running" in run.stderr and not target.exists() and not FakeKgserve.posts
    forced = subprocess.run(
        [*argv, "--use-running"], env=_env(), cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert forced.returncode == 0, forced.stderr
    assert "(--use-running: using it)" in forced.stderr and target.exists()


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--ready-timeout", "5s"], "--ready-timeout takes whole seconds (e.g. --ready-timeout 300), not '5s'"),
        (["--ready-timeout=1.5"], "--ready-timeout takes whole seconds"),
        (["--port", "91x"], "--port takes a port number (0-65535), not '91x'"),
        (["--backend", "cu da"], "--backend takes a backend name"),
    ],
)
def test_a_bad_number_is_refused_before_anything_starts(tmp_path: Path, option: list[str], said: str) -> None:
    run = subprocess.run(
        [SERVE, *option, "x.json"], env=_env(), cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 1 and said in run.stderr, run.stderr
    assert "starting kgserve" not in run.stderr


def test_a_config_value_never_reaches_a_shell(tmp_path: Path) -> None:
    """server.auth_token_env `T[$(touch FILE)]` was expanded by bash's ${!name} (its subscript run): refused now."""
    config = _config_with_port(tmp_path, _free_port())
    witness = tmp_path / "pwned"
    hostile = f"  auth_token_env: 'T[$(touch {witness})]'"
    text, count = re.subn(r"(?m)^  auth_token_env: null", hostile, config.read_text())
    assert count == 1
    config.write_text(text)
    run = subprocess.run(
        [SERVE, "--config", str(config), "x.json"],
        env={**_env(), "T": "x"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 1
    assert "is not an environment variable name" in run.stderr
    assert not witness.exists()
