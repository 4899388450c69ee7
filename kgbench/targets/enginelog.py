"""What kgbench reads from the engines' stderr, as kgserve logs it (kgserve.engine.process.stderr_line) or as the
direct target keeps it: KataGo's `Unused key` warnings (a misspelt cfg key only warns, and KataGo then runs with
its default) and the NN statistics each engine prints when it exits (`NN rows`, `NN batches`).
"""

from __future__ import annotations

import re

from kgserve.engine.process import STDERR_LINE

__all__ = ["MAX_LINES", "find_unused_keys", "parse_nn_stats", "unused_key_reason"]

MAX_LINES = 50_000  # the log lines a target keeps in memory (the whole log is in its file)
UNUSED_KEY = re.compile(r"Unused key '([^']+)'")
_NN_STAT = re.compile(r"NN (rows|batches|avg batch size): (\S+)")


def find_unused_keys(text: str) -> list[str]:
    """Keys KataGo reported as `Unused key` (it ignores them and runs with its defaults)."""
    return sorted(set(UNUSED_KEY.findall(text)))


def unused_key_reason(keys: list[str]) -> str:
    """The one-line failure for keys KataGo warned about as `Unused key`."""
    names = ", ".join(map(repr, keys))
    return f"the engine warned 'Unused key' for {names}: KataGo ignored it and would run with its default"


def parse_nn_stats(text: str) -> dict[str, float]:
    """nn_rows, nn_batches (summed over engines) and nn_avg_batch_size (rows / batches) from the engines' stderr
    lines. Empty when no engine printed its statistics (killed, or never started)."""
    per_engine: dict[int, dict[str, float]] = {}
    for line in STDERR_LINE.finditer(text):
        stat = _NN_STAT.search(line.group(3))
        if stat is None:
            continue
        try:
            number = float(stat.group(2))
        except ValueError:
            continue
        per_engine.setdefault(int(line.group(2)), {})[stat.group(1)] = number  # the last report of an engine wins
    rows = sum(stats.get("rows", 0.0) for stats in per_engine.values())
    batches = sum(stats.get("batches", 0.0) for stats in per_engine.values())
    if not per_engine or not any("rows" in stats for stats in per_engine.values()):
        return {}
    out = {"nn_rows": rows, "nn_batches": batches}
    if batches > 0:
        out["nn_avg_batch_size"] = rows / batches
    return out
