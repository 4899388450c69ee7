"""Start-up and exit of the simulated engine: KataGo's stderr log lines, env knobs, model and memory checks."""

from __future__ import annotations

import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kgserve.katago.netfile import read_model_name
from kgserve.sim.cfgfile import CfgError, SimCfg
from kgserve.sim.devmem import DeviceMemory
from kgserve.sim.model.profiles import DEFAULT_PROFILE, get_profile, profile_for_model
from kgserve.sim.model.throughput import SimParams, device_memory_gb
from kgserve.sim.overrides import OverrideError, human_sl_profile, human_sl_unused

__all__ = ["VERSION", "Knobs", "Log", "abort", "check_memory", "check_model", "human_sl_warning", "model_names"]

VERSION = "1.17.2-sim"
GIT_HASH = "simulated"


@dataclass(frozen=True)
class Knobs:
    speed: float
    seed: int
    device: str
    fixed_rps: float | None
    startup_s: float
    profile: str = DEFAULT_PROFILE

    @classmethod
    def from_env(cls, model: str | None = None) -> Knobs:
        """The KGSERVE_SIM_* knobs; without KGSERVE_SIM_PROFILE the profile follows `model` (the -model file: a
        synthetic net of a layout some profile stands for) or is the default one."""
        env = os.environ
        speed = float(env.get("KGSERVE_SIM_SPEED", "1") or 1)
        fixed = env.get("KGSERVE_SIM_FIXED_RPS", "")
        return cls(
            speed=speed if speed > 0 else 1.0,
            seed=int(env.get("KGSERVE_SIM_SEED", "0") or 0),
            device=env.get("KGSERVE_SIM_DEVICE", "gpu0") or "gpu0",
            fixed_rps=float(fixed) if fixed.strip() else None,
            startup_s=float(env.get("KGSERVE_SIM_STARTUP_S", "0.3") or 0.3),
            profile=get_profile(env.get("KGSERVE_SIM_PROFILE", "") or _model_profile(model) or DEFAULT_PROFILE).name,
        )


def _model_profile(model: str | None) -> str | None:
    if model is None:
        return None
    try:
        return profile_for_model(read_model_name(Path(model)))
    except (OSError, EOFError):
        return None  # a missing or unreadable file: check_model says so


class Log:
    """KataGo's logger on stderr: `YYYY-MM-DD HH:MM:SS+0000: message`."""

    def write(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S+0000", time.gmtime())
        sys.stderr.write(f"{stamp}: {message}\n")
        sys.stderr.flush()

    def raw(self, text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()


def abort(kind: str, what: str, code: int = 134) -> None:
    """An uncaught C++ exception: `terminate called after throwing ...`, then the abort exit status."""
    sys.stderr.write(f"terminate called after throwing an instance of '{kind}'\n  what():  {what}\n")
    sys.stderr.flush()
    os._exit(code)


def model_names(model: str) -> tuple[str, str]:
    name = Path(model).name
    internal = name
    for suffix in (".bin.gz", ".txt.gz", ".bin", ".gz"):
        if internal.endswith(suffix):
            internal = internal[: -len(suffix)]
            break
    return name, internal


def start_log(log: Log, cfg: SimCfg, model: str, seed: int) -> None:
    log.write("Running with following config:\n" + cfg.echo())
    log.write("Analysis Engine starting...")
    log.write(f"KataGo v{VERSION} SIMULATED (kgserve.sim: no neural net is evaluated, timings come from a model)")
    _human_sl_profile(cfg)  # KataGo reads the search parameters here (loadParams) and dies on a bad profile
    log.write(f"nnRandSeed0 = {random.Random(seed).getrandbits(64)}")
    log.write(f"After dedups: nnModelFile0 = {model} useFP16 auto")
    log.write("Initializing neural net buffer to be size 19 * 19 allowing smaller boards")


def _human_sl_profile(cfg: SimCfg) -> bool:
    """Whether the cfg sets a human-SL profile; an unknown one aborts start-up as in KataGo."""
    try:
        return human_sl_profile(cfg.values.get("humanSLProfile", ""))
    except OverrideError as err:
        abort("StringError", str(err))
        return False


def human_sl_warning(log: Log, cfg: SimCfg, model: str) -> None:
    """Setup::maybeWarnHumanSLParams at start-up: a profile in the cfg, a net without human-SL input (the sim's
    nets never have one); to the log and to stderr. KataGo starts anyway; every query with overrideSettings
    then fails on it."""
    if _human_sl_profile(cfg):
        log.write(human_sl_unused(model))
        log.raw(human_sl_unused(model) + "\n")


def check_model(model: str) -> None:
    if not Path(model).is_file():
        abort(
            "StringError",
            f"Error loading or parsing model file {model}: Could not open file {model} - "
            "does not exist or invalid permissions?",
        )


def check_memory(p: SimParams, device: str) -> DeviceMemory:
    """Allocate this process's share of the simulated device, or fail like a CUDA out-of-memory error."""
    need = device_memory_gb(p)
    memory = DeviceMemory(device, p.device.memory_gb)
    fits, others = memory.allocate(need)
    if not fits:
        sys.stderr.write(
            "terminate called after throwing an instance of 'StringError'\n"
            "  what():  CUDA Error, for cudaMalloc(&buf, bytes) file cudahelpers.cu, func mallocOnDevice: "
            f"out of memory (SIMULATED device '{device}': {p.server_threads} server thread(s) x nnMaxBatchSize "
            f"{p.max_batch} need {need:.1f} GB, other processes hold {others:.1f} GB, the simulated "
            f"{p.device.device_name} has {p.device.memory_gb:.0f} GB)\n"
        )
        sys.stderr.flush()
        os._exit(1)
    return memory


def batch_size_note(log: Log, p: SimParams) -> None:
    total_batch = p.server_threads * p.max_batch
    threads = p.search_threads * p.analysis_threads
    if total_batch * 1.5 <= threads:
        log.write(
            f"Note: nnMaxBatchSize * number of GPUs ({total_batch}) is smaller than numSearchThreads * "
            f"numAnalysisThreads ({threads})"
        )
        log.write(
            "The number of simultaneous threads that might query the GPU could be larger than the batch size "
            "that the GPU will handle at once."
        )
        log.write("It may improve performance to increase nnMaxBatchSize, unless you are constrained on GPU memory.")


def backend_log(log: Log, p: SimParams, internal: str) -> None:
    for i in range(p.server_threads):
        log.write(f"SIMULATED CUDA backend thread {i}: Found GPU {p.device.device_name} memory 150754820096")
        log.write(f"SIMULATED CUDA backend thread {i}: Model version 15")
        log.write(f"SIMULATED CUDA backend thread {i}: Model name: {internal} (SIMULATED)")


def unused_key_warnings(log: Log, cfg: SimCfg) -> None:
    unused = cfg.unused_keys()
    if not unused:
        return
    lines = [
        "--------------",
        f"WARNING: Config had unused keys! You may have a typo, an option you specified is being unused from "
        f"{cfg.file_name}",
        *(f"WARNING: Unused key '{key}' in {cfg.file_name}" for key in unused),
        "--------------",
    ]
    for line in lines:
        log.write(line)
    log.raw("".join(line + "\n" for line in lines))


def exit_log(log: Log, model: str, rows: int, batches: int, server_threads: int) -> None:
    log.write(model)
    log.write(f"NN rows: {rows}")
    log.write(f"NN batches: {batches}")
    log.write(f"NN avg batch size: {_cpp_double(rows / batches) if batches else '-nan'}")
    for i in range(server_threads):
        share_rows = rows // server_threads + (1 if i < rows % server_threads else 0)
        share_batches = batches // server_threads + (1 if i < batches % server_threads else 0)
        log.write(f"GPU {i} finishing, processed {share_rows} rows {share_batches} batches")
    log.write("All cleaned up, quitting")


def _cpp_double(value: float) -> str:
    """Global::doubleToString: ostream << double (6 significant digits, no trailing zeros)."""
    return f"{value:.6g}"


__all__ += ["CfgError", "backend_log", "batch_size_note", "exit_log", "start_log", "unused_key_warnings"]
