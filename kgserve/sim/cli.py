"""Command line of the simulated engine (KataGo's `analysis` and `benchmark` subcommands, single-dash flags)."""

from __future__ import annotations

import sys
import time

from kgserve.katago.protocol import READY_LINE
from kgserve.sim.cfgfile import CfgError, SimCfg, load_cfg, parse_cfg_text
from kgserve.sim.model.throughput import SimParams
from kgserve.sim.queries import Defaults
from kgserve.sim.startup import (
    Knobs,
    Log,
    abort,
    backend_log,
    batch_size_note,
    check_memory,
    check_model,
    exit_log,
    human_sl_warning,
    model_names,
    start_log,
    unused_key_warnings,
)

__all__ = ["main", "parse_flags"]

USAGE = (
    "usage: python -m kgserve.sim analysis -config CFG -model MODEL [-override-config K=V,...]\n"
    "       python -m kgserve.sim benchmark -config CFG -model MODEL [-v VISITS] [-t T1,T2,...] [-n POSITIONS]\n"
)


def parse_flags(argv: list[str]) -> dict[str, str]:
    flags: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            raise ValueError(f"unexpected argument {arg!r}")
        name = arg.lstrip("-")
        if "=" in name:
            name, value = name.split("=", 1)
        elif name in ("quit-without-waiting",):
            value = "true"
        else:
            if i + 1 >= len(argv):
                raise ValueError(f"missing value for {arg}")
            value = argv[i + 1]
            i += 1
        flags[name] = value
        i += 1
    return flags


def _load(flags: dict[str, str]) -> SimCfg:
    if "config" not in flags or "model" not in flags:
        raise ValueError("-config and -model are required")
    cfg = load_cfg(flags["config"])
    if "override-config" in flags:
        for item in flags["override-config"].split(","):
            if item.strip():
                cfg.values.update(parse_cfg_text(item.strip()))
    return cfg


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("analysis", "benchmark"):
        sys.stderr.write(USAGE)
        return 1
    try:
        flags = parse_flags(argv[1:])
        cfg = _load(flags)
        Knobs.from_env()  # an unknown KGSERVE_SIM_PROFILE fails here, before any start-up line
    except ValueError as err:
        sys.stderr.write(f"Error: {err}\n{USAGE}")
        return 1
    except CfgError as err:
        abort(err.kind, err.message)
        return 134
    if argv[0] == "benchmark":
        from kgserve.sim.benchmark import run_benchmark

        return run_benchmark(cfg, flags)
    return run_analysis(cfg, flags)


def run_analysis(cfg: SimCfg, flags: dict[str, str]) -> int:
    from kgserve.sim.analysis import Engine

    model = flags["model"]
    knobs = Knobs.from_env(model)
    log = Log()
    cfg.apply_aliases()
    if "analysis-threads" in flags:
        cfg.values.setdefault("numAnalysisThreads", flags["analysis-threads"])
    try:
        threads = cfg.require_int("numAnalysisThreads", 1, 16384)
        values = {k: v for k, v in cfg.values.items()}
        params = SimParams.from_cfg({**values, "numAnalysisThreads": threads}, knobs.profile)
        defaults = Defaults(
            max_visits=cfg.get_int("maxVisits", 1 << 50, 1, 1 << 50),
            pv_len=cfg.get_int("analysisPVLen", 15, 1, 100),
            warn_unused_fields=cfg.values.get("warnUnusedFields", "true").lower() != "false",
            cfg_values=dict(cfg.values),
            cfg_name=cfg.file_name,
            model=model,
        )
    except (CfgError, ValueError) as err:
        abort("IOError", getattr(err, "message", str(err)))
        return 134
    start_log(log, cfg, model, knobs.seed)
    check_model(model)
    memory = check_memory(params, knobs.device)
    name, internal = model_names(model)
    backend_log(log, params, internal)
    batch_size_note(log, params)
    unused_key_warnings(log, cfg)
    human_sl_warning(log, cfg, model)
    time.sleep(knobs.startup_s * (1.0 + (1 << params.cache_pow) / (1 << 24)) / knobs.speed)
    log.write(f"Loaded config {cfg.file_name}")
    log.write(f"Loaded model {model}")
    log.write(f"Analyzing up to {params.analysis_threads} positions at a time in parallel")
    log.write(READY_LINE)
    perspective = cfg.values.get("reportAnalysisWinratesAs", "SIDETOMOVE").upper()
    model_info = {
        "internalName": internal,
        "maxBatchSize": params.max_batch,
        "name": name,
        "usesHumanSLProfile": False,
        "usingFP16": cfg.values.get("useFP16", "auto"),
        "version": 15,
    }
    engine = Engine(params, knobs, defaults, model_info, perspective, log)
    try:
        rows, batches = engine.run()
    finally:
        memory.free()
    exit_log(log, model, rows, batches, params.server_threads)  # the -model argument, as given
    return 0
