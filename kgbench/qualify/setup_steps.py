"""The qualification's first steps: the node, the KataGo build, the network, the GPU's matrix-product rate."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from dataclasses import asdict
from pathlib import Path

import psutil

from kgbench.nets import ModelFormatError, architecture, describe_model, katrain_model_path, write_synthetic
from kgbench.qualify.context import Qualification
from kgbench.qualify.runner import StepFailed, StepRecord
from kgbench.track.gemm import device_gemm_rate
from kgbench.track.sampling.gpu import gpu_name, nvml_absent_reason
from kgbench.track.tracking import git_commit
from kgserve.katago.netfile import KatrainNetMissing

__all__ = ["check_build", "describe_node", "measure_gemm_rate", "resolve_net"]

_VERSION = re.compile(r"KataGo v(\S+)")
_BACKEND = re.compile(r"Using (\S+) backend", re.IGNORECASE)


def describe_node(q: Qualification, record: StepRecord) -> str:
    driver = ""
    try:
        import pynvml

        pynvml.nvmlInit()
        raw = pynvml.nvmlSystemGetDriverVersion()
        driver = raw.decode() if isinstance(raw, bytes) else str(raw)
    except Exception:
        driver = ""
    facts = {
        "host": platform.node(),
        "cpu_cores": psutil.cpu_count() or 0,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "gpu": gpu_name() or "none",
        "gpu_driver": driver,
        "gpu_absent_reason": nvml_absent_reason(),
        "git_commit": git_commit(),
        "budget_s": q.options.budget_s,
        "scale": q.options.scale.name,
    }
    q.facts.update(facts)
    record.data.update(facts)
    gpu = f"{facts['gpu']} (driver {driver})" if driver else f"no GPU ({facts['gpu_absent_reason']})"
    return f"{facts['cpu_cores']} cores, {facts['memory_gib']} GiB, {gpu}"


def check_build(q: Qualification, record: StepRecord) -> str:
    """`katago version` runs and names its backend; a TensorRT build is looked for (its jobs are skipped without)."""
    binary = q.options.binary
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise StepFailed(f"no executable KataGo at {binary} (--binary; runtime/fetch_katago.sh or build_katago.sh)")
    try:
        done = subprocess.run([str(binary), "version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StepFailed(f"{binary} version did not run: {exc}") from None
    text = done.stdout + done.stderr
    q.log("build").parent.mkdir(parents=True, exist_ok=True)
    q.log("build").write_text(text, encoding="utf-8")
    version = _VERSION.search(text)
    if done.returncode != 0 or version is None:
        last = text.strip().splitlines()[-1:] or ["no output"]
        raise StepFailed(f"{binary} version exited {done.returncode}: {last[0]}")
    q.katago_version = version.group(1)
    backend = _BACKEND.search(text)
    record.data.update(katago_version=q.katago_version, build_backend=backend.group(1) if backend else "")
    q.backends = [q.options.backend]
    trt = q.options.trt_binary
    if trt is not None and trt.is_file() and os.access(trt, os.X_OK):
        q.backends.append("trt")
    else:
        q.skipped_backends["trt"] = (
            f"no TensorRT build ({trt} is missing)" if trt is not None else "no TensorRT build was given (--trt-binary)"
        )
    record.data.update(backends=q.backends, skipped_backends=q.skipped_backends)
    built = f"KataGo {q.katago_version}, {backend.group(1) if backend else 'backend not named'}"
    return built + (f"; trt jobs skipped: {q.skipped_backends['trt']}" if "trt" in q.skipped_backends else "")


def resolve_net(q: Qualification, record: StepRecord) -> str:
    """--net katrain | synthetic:ARCH | PATH -> the model file, its description and FLOPs per evaluation."""
    spec = q.options.net
    if spec == "katrain":
        try:
            model = katrain_model_path()
        except KatrainNetMissing as exc:
            raise StepFailed(str(exc)) from None
    elif spec.startswith("synthetic:"):
        arch = spec.removeprefix("synthetic:")
        try:
            chosen = architecture(arch)
        except ValueError as exc:
            raise StepFailed(str(exc)) from None
        model = q.out / "nets" / f"synthetic-{arch}.bin"
        write_synthetic(chosen, model)
    else:
        model = Path(spec).expanduser().resolve()
    try:
        q.net = describe_model(model)
    except ModelFormatError as exc:
        raise StepFailed(f"--net {spec}: {exc}") from None
    q.model = model
    q.write_runtime_config()
    net = q.net
    record.data.update(
        model=str(model),
        name=net.name,
        architecture=net.architecture,
        synthetic=net.synthetic,
        params=net.params,
        gflops_per_eval=net.flops() / 1e9,
        attention_gflops_per_eval=net.attention_flops() / 1e9,
    )
    kind = "SYNTHETIC (random weights: throughput only)" if net.synthetic else "trained"
    return (
        f"{net.name} at {model}: {net.architecture}, {net.params:,} params, {net.flops() / 1e9:.2f} GFLOP/eval, {kind}"
    )


def measure_gemm_rate(q: Qualification, record: StepRecord) -> str:
    device = gpu_name()
    if device is None:
        record.status = "skipped"
        record.data["reason"] = nvml_absent_reason() or "no GPU"
        return f"no GPU ({record.data['reason']}): no MFU in this qualification"
    q.gemm = device_gemm_rate(q.out / "device_gemm.json", device, timeout_s=q.budget.share(0.05, 60))
    record.data.update(asdict(q.gemm))
    if q.gemm.tflops is None:
        return f"{device}: not measured ({q.gemm.reason}); MFU against the datasheet only"
    return (
        f"{device}: {q.gemm.tflops:.0f} TFLOP/s dense FP16 measured ({q.gemm.shape}), "
        f"datasheet {q.gemm.datasheet_tflops or '?'}"
    )
