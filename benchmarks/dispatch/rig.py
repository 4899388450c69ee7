"""What the dispatch benchmarks share: kgserve as a subprocess serving the sim or the real KataGo with N analysis
threads and runtime/config.yaml's settings (the thread reserve as shipped unless told), WebSocket clients from an
address of their own, the machine's load average, the figures printed under the machine line."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from websockets.asyncio.client import ClientConnection, connect

from kgbench.targets.kgserve_process import KgserveProcess
from kgbench.targets.sim import cleanup_devices, sim_env, sim_settings
from kgbench.track.machine import machine_line
from kgserve.paths import PROJECT_ROOT
from kgserve.settings import BackendSettings, Settings

__all__ = [
    "ENGINES",
    "cfg_for",
    "final_id",
    "load_average",
    "print_figures",
    "recv_final",
    "served",
    "settings_for",
    "ws",
]

ENGINES = ("sim", "katago")
KATAGO_ENV = ("KGBENCH_KATAGO_BIN", "KGBENCH_KATAGO_MODEL")
# the real-CPU cfg of issue 33's report: N analysis threads x 1 search thread, batch 4
CPU_CFG = """# benchmarks.dispatch: the real CPU KataGo, issue 33's cfg
maxVisits = 100
numAnalysisThreads = {threads}
numSearchThreadsPerAnalysisThread = 1
nnMaxBatchSize = 4
nnCacheSizePowerOfTwo = 18
nnMutexPoolSizePowerOfTwo = 14
reportAnalysisWinratesAs = BLACK
"""


def load_average() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def print_figures(engine: str, table: str) -> None:
    """The machine line, naming the engine the run served (machine_line says "simulated engine"), then the table."""
    print(machine_line().replace("simulated engine", f"{engine} engine"))
    print()
    print(table)


def cfg_for(engine: str, threads: int, directory: Path) -> Path:
    """The served cfg (the sim: runtime/katago_serving.cfg) with `threads` analysis threads, or the CPU cfg."""
    path = directory / f"dispatch_{engine}_{threads}.cfg"
    if engine == "katago":
        path.write_text(CPU_CFG.format(threads=threads), encoding="utf-8")
        return path
    lines = (PROJECT_ROOT / "runtime" / "katago_serving.cfg").read_text(encoding="utf-8").splitlines()
    lines = [f"numAnalysisThreads = {threads}" if line.startswith("numAnalysisThreads") else line for line in lines]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def settings_for(engine: str, threads: int, directory: Path) -> tuple[Settings, dict[str, str]]:
    """runtime/config.yaml's settings serving `engine` with `threads` analysis threads, and kgserve's environment."""
    settings = sim_settings(1)
    env: dict[str, str]
    if engine == "sim":
        env = sim_env(None, device=f"dispatch{os.getpid()}", KGSERVE_SIM_SPEED="1")
    else:
        missing = [name for name in KATAGO_ENV if not os.environ.get(name)]
        if missing:
            raise SystemExit(f"--engine katago needs {' and '.join(missing)} (the KataGo binary and its network)")
        backend = BackendSettings(
            command=[os.environ["KGBENCH_KATAGO_BIN"]],
            model=Path(os.environ["KGBENCH_KATAGO_MODEL"]),
            startup_timeout_s=120,
        )
        engine_settings = settings.engine.model_copy(
            update={"backend": "eigen", "backends": {**settings.engine.backends, "eigen": backend}}
        )
        settings = settings.model_copy(update={"engine": engine_settings})
        env = dict(os.environ)
    cfg = cfg_for(engine, threads, directory)
    engine_part = settings.engine.model_copy(update={"cfg": cfg, "home_data_dir": directory / "katago_home"})
    return settings.model_copy(update={"engine": engine_part}), env


@contextlib.contextmanager
def served(
    settings: Settings,
    env: Mapping[str, str],
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    drop: Mapping[str, Sequence[str]] | None = None,
    cwd: Path | None = None,
) -> Iterator[KgserveProcess]:
    """`python -m kgserve` with `settings` (sections updated by `overrides`, e.g. {"engine": {"thread_reserve":
    0}}; keys in `drop` left out) on a free loopback port, ready; stopped (SIGTERM) on the way out. Nothing else is
    changed: the per-client caps and the reserve are the shipped ones. `cwd`: where kgserve runs (`python -m`
    imports the kgserve found there first)."""
    data: dict[str, Any] = settings.model_dump(mode="json")
    data["server"].update(host="127.0.0.1", port=0, auth_token_env=None)
    for section, values in (overrides or {}).items():
        data.setdefault(section, {}).update(values)
    for section, keys in (drop or {}).items():
        for key in keys:
            data.get(section, {}).pop(key, None)
    with tempfile.TemporaryDirectory(prefix="kgbench-dispatch-") as tmp:
        config = Path(tmp) / "kgserve_dispatch.yaml"
        config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        proc = KgserveProcess(config, Path(tmp) / "kgserve.log", env, cwd=cwd)
        proc.start()
        try:
            proc.wait_ready(180)
            yield proc
        finally:
            proc.stop(grace_s=5.0)
            cleanup_devices()


@contextlib.asynccontextmanager
async def ws(url: str, address: str = "127.0.0.1", **params: str) -> Any:
    """A WebSocket to kgserve's /ws from `address`."""
    query = "&".join(f"{key}={value}" for key, value in params.items())
    target = url.replace("http://", "ws://") + "/ws" + (f"?{query}" if query else "")
    async with connect(target, max_size=None, local_addr=(address, 0), open_timeout=60) as socket:
        yield socket


def final_id(line: str | bytes) -> str | None:
    """The id of a final line (`isDuringSearch: false`), else None; an error line raises."""
    doc = json.loads(line)
    if "error" in doc:
        raise RuntimeError(f"kgserve answered an error: {doc}")
    return str(doc["id"]) if doc.get("isDuringSearch") is False else None


async def recv_final(socket: ClientConnection) -> tuple[str, float]:
    """The next final line's id and when it came."""
    while True:
        found = final_id(await socket.recv())
        if found is not None:
            return found, time.monotonic()
