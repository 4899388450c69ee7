"""Shared bits of the benchmark scripts: a kgserve subprocess with the sim, RSS, the machine line."""

from __future__ import annotations

import contextlib
import datetime as dt
import glob
import os
import platform
import socket
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil
import yaml

from kgbench.targets.kgserve_process import KgserveProcess
from kgserve.settings import Settings, load_settings

__all__ = [
    "cleanup_devices",
    "engine_pids",
    "free_port",
    "kgserve_running",
    "machine_line",
    "rss_mb",
    "sim_env",
    "sim_settings",
    "write_config",
]


def sim_settings(processes: int = 1, config: Path | None = None, min_ready: int | None = None) -> Settings:
    """runtime/config.yaml with backend=sim and ``processes`` engines (min_ready: all unless given)."""
    settings = load_settings(config).with_overrides(backend="sim", port=0, host="127.0.0.1")
    engine = settings.engine.model_copy(update={"processes": processes, "min_ready": min_ready})
    return settings.model_copy(update={"engine": engine})


_DEVICES: set[str] = set()  # simulated device names handed out by sim_env (their state files live in $TMPDIR)


def sim_env(fixed_rps: float | None = None, device: str | None = None, **extra: str) -> dict[str, str]:
    """Environment for kgserve / the pool: the sim's knobs (KGSERVE_SIM_*), fast start-up."""
    env = {**os.environ, "KGSERVE_SIM_STARTUP_S": "0.05"}
    if fixed_rps is not None:
        env["KGSERVE_SIM_FIXED_RPS"] = f"{fixed_rps:g}"
    else:
        env.pop("KGSERVE_SIM_FIXED_RPS", None)
    env["KGSERVE_SIM_DEVICE"] = device or f"bench{os.getpid()}"
    _DEVICES.add(env["KGSERVE_SIM_DEVICE"])
    env.update(extra)
    return env


def cleanup_devices() -> None:
    """Remove the sim's state files of the devices sim_env named (after every engine using them stopped)."""
    tmp = Path(tempfile.gettempdir())
    for name in sorted(_DEVICES):
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        for path in tmp.glob(f"kgserve-sim-device-{glob.escape(safe)}.*"):
            with contextlib.suppress(OSError):
                path.unlink()
    _DEVICES.clear()


def write_config(settings: Settings, directory: Path, *, max_inflight: int = 4096) -> Path:
    """A kgserve config file with absolute paths, loopback, port 0, no auth."""
    data: dict[str, Any] = settings.model_dump(mode="json")
    data["server"].update(host="127.0.0.1", port=0, auth_token_env=None)
    data.setdefault("limits", {})["max_inflight_queries"] = max_inflight
    path = directory / "kgserve_bench.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@contextlib.contextmanager
def kgserve_running(
    settings: Settings, env: Mapping[str, str], *, max_inflight: int = 4096, ready_timeout_s: float = 90.0
) -> Iterator[KgserveProcess]:
    """A real ``python -m kgserve`` subprocess on a free loopback port, ready; stopped (SIGTERM) on exit."""
    with tempfile.TemporaryDirectory(prefix="kgbench-bench-") as tmp:
        config = write_config(settings, Path(tmp), max_inflight=max_inflight)
        proc = KgserveProcess(config, Path(tmp) / "kgserve.log", env)
        proc.start()
        try:
            proc.wait_ready(ready_timeout_s)
            yield proc
        finally:
            proc.stop(grace_s=5.0)
            if proc.proc is not None and proc.proc.stdout is not None:
                proc.proc.stdout.close()


def engine_pids(proc: KgserveProcess, ready_only: bool = False) -> list[int]:
    """Pids of kgserve's live engines (``ready_only``: of those in state ready), from /readyz."""
    _, body = proc.get_json("/readyz")
    engines = body.get("engines") or []
    return [int(e["pid"]) for e in engines if e.get("pid") and (not ready_only or e.get("state") == "ready")]


def free_port() -> int:
    """A free loopback port, for a server that cannot bind port 0 itself (HAProxy)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        return float(psutil.Process(pid).memory_info().rss) / 2**20
    except psutil.Error:
        return None


def machine_line(setting: str = "load generator included, loopback, simulated engine") -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = psutil.virtual_memory().total / 2**30
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{now} · {socket.gethostname()} · {cpu} · {psutil.cpu_count()} logical CPUs · {mem:.0f} GiB RAM · "
        f"Python {platform.python_version()} · {setting}"
    )
