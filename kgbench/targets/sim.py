"""The simulated engine as a quick target: settings for N sim engines, its environment (the KGSERVE_SIM_* knobs,
fast start-up), and the clean-up of the simulated devices' state files afterwards."""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
from pathlib import Path

from kgserve.settings import Settings, load_settings

__all__ = ["cleanup_devices", "sim_env", "sim_settings"]


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
