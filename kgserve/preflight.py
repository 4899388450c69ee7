"""Start-up checks: does everything the engine needs exist here (binary, model, cfg)? Run by `python -m kgserve`
before it binds a port (exit 2 with one paragraph) and by kgbench before a job starts any engine.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from kgserve.katago.cfg import CfgParseError, read_cfg
from kgserve.katago.cfgcheck import cfg_problems
from kgserve.katago.netfile import is_synthetic_model, read_model_name
from kgserve.settings import Settings

__all__ = ["cfg_content_problems", "startup_problems"]


def startup_problems(settings: Settings) -> list[str]:
    """One sentence per missing file the engine needs, naming the path and its config key."""
    engine = settings.engine
    backend = engine.backend
    source = f" in {settings.source}" if settings.source else ""
    problems: list[str] = []
    argv = engine.argv_prefix(backend)
    program = argv[0]
    command_key = f"engine.backends.{backend}.command"
    if "/" in program:
        if not Path(program).is_file():
            problems.append(f"the engine binary {program} does not exist (config key {command_key}{source})")
        elif not os.access(program, os.X_OK):
            problems.append(f"the engine binary {program} is not executable (config key {command_key}{source})")
    elif shutil.which(program) is None:
        problems.append(f"the engine program {program!r} is not on PATH (config key {command_key}{source})")
    if argv[1:3] == ["-m", "kgserve.sim"] and importlib.util.find_spec("kgserve.sim") is None:
        problems.append(f"the simulated engine module kgserve.sim is not installed (config key {command_key}{source})")
    model = engine.model_for(backend)
    model_key = f"engine.backends.{backend}.model" if engine.backend_settings(backend).model else "engine.model"
    if not model.is_file():
        problems.append(f"the model file {model} does not exist (config key {model_key}{source})")
    elif is_synthetic_model(model) and not engine.throughput_test:
        problems.append(
            f"the model file {model} is a synthetic net ({read_model_name(model)}: random weights, its analyses are "
            f"noise) (config key {model_key}{source}); serve it only for a throughput test: "
            "engine.throughput_test: true or --throughput-test"
        )
    if not engine.cfg.is_file():
        problems.append(f"the KataGo analysis cfg {engine.cfg} does not exist (config key engine.cfg{source})")
    return problems


def cfg_content_problems(settings: Settings) -> list[str]:
    """One sentence per thing in the engine's cfg that KataGo would refuse, ignore or misread (its keys and
    values read with KataGo's own rules: kgserve.katago.cfgcheck); empty for a cfg served as written. A cfg
    that does not exist is startup_problems' to report."""
    path = settings.engine.cfg
    try:
        values = read_cfg(path)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [f"it cannot be read: {exc.strerror or exc}"]
    except CfgParseError as exc:
        return [f"KataGo cannot parse it: {exc}"]
    return cfg_problems(values, settings.engine.allow_unknown_cfg_keys)
