"""Which runtime a job's figures belong to: the runtime config it was composed from, its backend family (a GPU build,
the CPU build or the simulated engine), the KataGo and model it ran, and the machine. A figure measured in one
runtime says nothing about another, so promote never carries one across (kgbench.decide.runtimes).

A job's run records the runtime config (RUNTIME_CONFIG) and, when the command line named them, the binary and model
it ran instead of the config's (ENGINE_BINARY, ENGINE_MODEL); the backend, model name, GPU and host were tagged
before these were. A run from before a tag leaves that part unknown (""), and an unknown part matches anything.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass

from kgbench.track.sampling.gpu import gpu_name
from kgbench.track.schema import BACKEND, ENGINE_BINARY, ENGINE_MODEL, GPU_NAME, HOST, MODEL_FILE, RUNTIME_CONFIG

__all__ = ["RuntimeId", "backend_family", "runtime_of", "this_machine"]

_FAMILIES = {"cuda": "GPU", "trt": "GPU", "eigen": "CPU", "sim": "simulated"}


def backend_family(backend: str) -> str:
    """GPU (cuda, trt: promote may switch between them), CPU (eigen) or simulated (sim)."""
    return _FAMILIES.get(backend, backend)


def _machine(gpu: str | None, host: str | None) -> str:
    """A GPU's figures hold for that GPU model on any node; a CPU's only for its host."""
    return gpu if gpu and gpu != "none" else (host or "")


def this_machine() -> str:
    return _machine(gpu_name(), socket.gethostname())


@dataclass(frozen=True)
class RuntimeId:
    config: str  # the runtime config's absolute path ("": unknown)
    backend: str
    model: str  # the model file's name ("": unknown)
    machine: str  # the GPU's name, else the host ("": unknown)
    engine_binary: str = ""  # the KataGo named on the command line ("": the config's)
    engine_model: str = ""  # the model file named on the command line ("": the config's)

    @property
    def family(self) -> str:
        return backend_family(self.backend)

    @property
    def group(self) -> tuple[str, str, str, str, str, str]:
        """What runs must share to be compared: everything but the backend within its family."""
        return (self.config, self.family, self.model, self.machine, self.engine_binary, self.engine_model)

    def describe(self) -> str:
        """`eigen (CPU) with g170-b6c96.bin.gz on host1, KataGo /opt/katago named on the command line`."""
        text = f"{self.backend} ({self.family}) with {self.model or 'a model not recorded'}"
        text += f" on {self.machine}" if self.machine else ""
        if self.engine_binary:
            text += f", KataGo {self.engine_binary} named on the command line"
        return text


def runtime_of(tags: Mapping[str, str], params: Mapping[str, str] | None = None) -> RuntimeId:
    """A run's runtime from its tags (and params for the backend of a run without the tag)."""
    backend = tags.get(BACKEND) or (params or {}).get("backend", "")
    return RuntimeId(
        config=tags.get(RUNTIME_CONFIG, ""),
        backend=backend,
        model=tags.get(MODEL_FILE, ""),
        machine=_machine(tags.get(GPU_NAME), tags.get(HOST)),
        engine_binary=tags.get(ENGINE_BINARY, ""),
        engine_model=tags.get(ENGINE_MODEL, ""),
    )
