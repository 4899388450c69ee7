"""One qualification's state, shared by its steps: the options, the clock, the results folder and its own
runtime config and MLflow store, and what earlier steps found (the net, the GEMM rate, the best cfg)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kgbench.nets import NetDescription
from kgbench.qualify.options import QualifyOptions
from kgbench.qualify.runner import Budget, StepRecord
from kgbench.targets.kgserve_process import KgserveProcess
from kgbench.track.gemm import GemmRate
from kgserve.settings import load_settings

__all__ = ["Qualification"]


@dataclass
class Qualification:
    options: QualifyOptions
    budget: Budget
    records: list[StepRecord] = field(default_factory=list)
    model: Path | None = None
    net: NetDescription | None = None
    gemm: GemmRate | None = None
    katago_version: str = ""
    backends: list[str] = field(default_factory=list)  # the line's backends that can run here
    skipped_backends: dict[str, str] = field(default_factory=dict)  # backend -> why its jobs are skipped
    best: dict[str, Any] | None = None  # the promoted run's cfg keys and figures
    serving: KgserveProcess | None = None  # the kgserve the serve step started, kept for the pipe step
    serving_url: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def out(self) -> Path:
        return self.options.out

    @property
    def python(self) -> str:
        return self.options.python or sys.executable

    @property
    def runtime_config(self) -> Path:
        return self.out / "runtime" / "config.yaml"

    @property
    def scratch_dir(self) -> Path:
        return self.out / "runtime" / "promoted"

    @property
    def tracking_uri(self) -> str:
        return f"sqlite:///{self.out / 'mlflow.db'}"

    def env(self) -> dict[str, str]:
        """The subprocesses' environment: this qualification's own MLflow store."""
        return {"MLFLOW_TRACKING_URI": self.tracking_uri, **self.options.extra_env}

    def log(self, step: str) -> Path:
        return self.out / "steps" / f"{step}.log"

    def write_runtime_config(self) -> None:
        """The qualification's runtime config: the base config with the build under qualification as its backend's
        command (and a TensorRT build when there is one), the net as the model, homeDataDir in the results folder."""
        base = load_settings(self.options.base_config)
        data: dict[str, Any] = base.model_dump(mode="json")
        engine = data["engine"]
        engine["backend"] = self.options.backend
        engine["backends"][self.options.backend]["command"] = [str(self.options.binary.resolve())]
        engine["backends"][self.options.backend]["model"] = None
        if self.options.trt_binary is not None and "trt" in engine["backends"]:
            engine["backends"]["trt"]["command"] = [str(self.options.trt_binary.resolve())]
        engine["model"] = str(self.model)
        engine["home_data_dir"] = str(self.out / "runtime" / "katago_home")
        engine["cfg"] = str(self.out / "runtime" / "katago_serving.cfg")
        engine["throughput_test"] = bool(self.net is not None and self.net.synthetic)
        self.runtime_config.parent.mkdir(parents=True, exist_ok=True)
        (self.out / "runtime" / "katago_serving.cfg").write_text("# replaced by the promote step\n", encoding="utf-8")
        header = f"# runtime config of the node qualification in {self.out} (from {self.options.base_config})\n"
        self.runtime_config.write_text(header + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
