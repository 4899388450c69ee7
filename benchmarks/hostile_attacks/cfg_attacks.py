"""Hostile cfgs (issue 44 item 2, issue 45 item 4): what an operator with write access to a cfg, or to what
kgbench renders one from, can try, replayed against the real pipeline.

``python -m benchmarks.hostile_attacks.cfg_attacks [--katago]``

- **smuggle**, one per line break of KataGo or a Python reader (CR, VT, FF, FS, GS, RS, NEL, U+2028, U+2029, LF):
  a `homeDataDir` holding `<break>maxVisits = 10`. Held when kgbench's render refuses it, and kgserve's reader
  sees the same keys KataGo does (one value, no `maxVisits`; with `--katago`, the real binary's own log of the
  value it read is compared too: KGBENCH_KATAGO_BIN / KGBENCH_KATAGO_MODEL).
- **bad cfg**: a misspelt key, an unparsable value, an out-of-range value, a float for an int, a key twice, an empty
  cfg, a line KataGo cannot parse. Held when `python -m kgserve` (sim engine) exits 2 naming the key, with no
  traceback, before it listens.
- **refusing engine**: an engine that exits before ready with the same error every start. Held when kgserve exits
  3 with that error within the bound, instead of staying up with /readyz 503.

Exit status 0 only when every attack held. Every process is bounded (60 s) and loopback only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from kgbench.sweep.compose.render import RenderError, render_cfg
from kgbench.targets.sim import sim_settings
from kgserve.katago.cfg import LINE_BREAKS, read_cfg

__all__ = ["main"]

REPO = Path(__file__).resolve().parents[2]
GOOD = {"numAnalysisThreads": 4, "numSearchThreadsPerAnalysisThread": 1, "maxVisits": 100, "nnMaxBatchSize": 16}
BAD_CFGS = {  # name -> (cfg text, what kgserve's refusal must name)
    "misspelt key": ("nnMaxBatchSze = 8\n", "'nnMaxBatchSze'"),
    "unparsable value": ("nnMaxBatchSize = abc\n", "'nnMaxBatchSize'"),
    "out of range": ("numAnalysisThreads = 0\n", "'numAnalysisThreads'"),
    "float for an int": ("maxVisits = 1e2\n", "'maxVisits'"),
    "key twice": ("maxVisits = 7\n", "Key 'maxVisits' + was specified multiple times"),
    "junk line": ("maxVisits 7\n", "Could not parse key value pair"),
}
REFUSING = "import sys; sys.stderr.write('Error: the cfg says no\\n'); sys.exit(1)"
TIMEOUT_S = 60


def _base(exclude: str = "") -> str:
    return "".join(f"{k} = {v}\n" for k, v in GOOD.items() if k != exclude)


def _config(directory: Path, cfg: Path, **engine: object) -> Path:
    data = sim_settings(1).model_dump(mode="json")
    data["server"].update(host="127.0.0.1", port=0, auth_token_env=None)
    data["engine"].update(cfg=str(cfg), **engine)
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """A bounded run with stdin closed and stderr kept (bytes: a CR in it stays a CR)."""
    return subprocess.run(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=TIMEOUT_S,
        env=env,
        check=False,
    )


def _kgserve(config: Path) -> tuple[int, str, float]:
    began = time.monotonic()
    argv = [sys.executable, "-m", "kgserve", "--config", str(config), "--port", "0"]
    result = _run(argv, REPO, {**os.environ, "PYTHONPATH": str(REPO)})
    return result.returncode, result.stderr.decode("utf-8", errors="replace"), time.monotonic() - began


def _katago_reads(directory: Path, text: str) -> str | None:
    """The nnRandSeed the real KataGo logs having read from `text` (None without --katago's binary)."""
    binary, model = os.environ.get("KGBENCH_KATAGO_BIN"), os.environ.get("KGBENCH_KATAGO_MODEL")
    if not binary or not model:
        return None
    cfg = directory / "katago.cfg"
    cfg.write_bytes(text.encode("utf-8"))
    result = _run([binary, "analysis", "-config", str(cfg), "-model", model], directory)
    for line in result.stderr.decode("utf-8", errors="replace").split("\n"):
        if "nnRandSeed0 = " in line:
            return line.split("nnRandSeed0 = ", 1)[1]
    return ""


def smuggle(directory: Path, char: str, real: bool) -> tuple[bool, str]:
    value = f"/data/a{char}maxVisits = 10"
    try:
        render_cfg({**GOOD, "maxVisits": None}, home_data_dir=value)
        return False, "render wrote it"
    except RenderError:
        pass
    # written by hand (as an operator could): kgserve must read what KataGo reads
    text = _base("maxVisits") + f"nnRandSeed = {value}\n"
    path = directory / "smuggle.cfg"
    path.write_bytes(text.encode("utf-8"))
    try:
        values = read_cfg(path)
    except ValueError as exc:
        return False, f"kgserve cannot read it: {exc}"
    one_line = char != "\n"
    if ("maxVisits" in values) == one_line:
        return False, f"kgserve reads {values}"
    note = "render refuses; kgserve reads " + ("one value" if one_line else "a second line")
    if real:
        seen = _katago_reads(directory, text)
        expected = value if one_line else "/data/a"
        if seen != expected:
            return False, f"KataGo read nnRandSeed {seen!r}, kgserve {values.get('nnRandSeed')!r}"
        note += ", as the real KataGo does"
    return True, note


def bad_cfg(directory: Path, text: str, named: str, *, whole: bool = False) -> tuple[bool, str]:
    """kgserve on the good cfg with `text` replacing its key's line (added again for a key twice; the whole cfg
    when `whole`)."""
    key = text.split(" ", 1)[0]
    base = "" if whole else _base() if "multiple" in named else _base(key)
    cfg = directory / "bad.cfg"
    cfg.write_text(base + text, encoding="utf-8")
    code, err, took = _kgserve(_config(directory, cfg))
    held = code == 2 and named in err and "Traceback" not in err and "listening" not in err
    return held, f"exit {code} in {took:.1f}s" + ("" if named in err else f"; {named} not named")


def refusing_engine(directory: Path) -> tuple[bool, str]:
    cfg = directory / "good.cfg"
    cfg.write_text(_base(), encoding="utf-8")
    config = _config(directory, cfg, restart_backoff_initial_s=0.1, restart_backoff_max_s=0.5)
    data = yaml.safe_load(config.read_text())
    data["engine"]["backends"]["sim"]["command"] = [sys.executable, "-c", REFUSING]
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    code, err, took = _kgserve(config)
    held = code == 3 and "Error: the cfg says no" in err and "Traceback" not in err
    return held, f"exit {code} in {took:.1f}s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--katago", action="store_true", help="also ask the real KataGo (KGBENCH_KATAGO_BIN/MODEL)")
    args = parser.parse_args(argv)
    if args.katago and not (os.environ.get("KGBENCH_KATAGO_BIN") and os.environ.get("KGBENCH_KATAGO_MODEL")):
        parser.error("--katago needs KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL")
    rows: list[tuple[str, bool, str]] = []
    with tempfile.TemporaryDirectory(prefix="kgbench-cfg-attacks-") as tmp:
        directory = Path(tmp)
        for char in sorted(LINE_BREAKS):
            rows.append((f"smuggle U+{ord(char):04X}", *smuggle(directory, char, args.katago)))
        for name, (text, named) in BAD_CFGS.items():
            rows.append((f"bad cfg: {name}", *bad_cfg(directory, text, named)))
        empty = bad_cfg(directory, "# nothing\n", "'numAnalysisThreads' is missing", whole=True)
        rows.append(("bad cfg: empty", *empty))
        rows.append(("refusing engine", *refusing_engine(directory)))
    width = max(len(name) for name, _, _ in rows)
    for name, held, note in rows:
        print(f"{name:<{width}}  {'held  ' if held else 'BROKEN'}  {note}")
    broken = sum(not held for _, held, _ in rows)
    print(f"{len(rows) - broken} of {len(rows)} cfg attacks held")
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
