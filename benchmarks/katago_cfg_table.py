"""Regenerate kgserve/katago/cfg_keys.py: the value rule of every cfg key KataGo reads, from KataGo's own source.

    python -m benchmarks.katago_cfg_table --src katago-v1.17.2-cpp-src.tar.gz   # or an unpacked cpp/ folder

Every `cfg.getInt("key", min, max)`, `getInt64`, `getUInt64`, `getFloat`, `getDouble`, `getBool`, `getEnabled`,
`getString` and `getStrings` call of the files the analysis command reads its cfg through (cpp/command/analysis.cpp,
cpp/program/setup.cpp, cpp/core/logger.cpp, cpp/neuralnet/*backend.cpp) gives a key, its getter and its range.
Keys built at run time are written out: `backendPrefix + "UseFP16"` for each backend prefix, the avoid-pattern
`find("PatternUtility")` as `avoidSgfPatternUtility`; a key with an index (`"maxVisits" + idxStr`) is recorded under
its base name (kgserve.katago.cfg.is_known_key decides which indexed names the analysis engine reads). Ranges are
C++ expressions evaluated with the constants of that source (a release build: COMPILE_MAX_BOARD_LEN 19).
"""

from __future__ import annotations

import argparse
import re
import tarfile
from pathlib import Path

__all__ = ["extract_rules", "main", "render_module"]

FILES = ("cpp/command/analysis.cpp", "cpp/program/setup.cpp", "cpp/core/logger.cpp")
BACKENDS = ("cuda", "trt", "metal", "opencl", "eigen")  # Setup::getBackendPrefixes
CONSTANTS = {  # the named bounds the getters use (cpp/game/board.h, cpp/neuralnet/nninputs.h, ...)
    "Board::MAX_LEN": "19",
    "NNPos::MAX_BOARD_LEN": "19",
    "SymmetryHelpers::NUM_SYMMETRIES": "8",
    "MAX_BOT_PARAMS_FROM_CFG": "4096",
    "Rules::MIN_USER_KOMI": "-400.0",
    "Rules::MAX_USER_KOMI": "400.0",
}
GETTERS = "Int|Int64|UInt64|Float|Double|Bool|Enabled|String|Strings|StringsNonEmptyTrim|Ints|Int64s|Floats|Doubles"
_CALL = re.compile(rf"(?:\.|->)get({GETTERS})\(")
_LITERAL = re.compile(r'"([A-Za-z0-9_-]*)"')
_ARITH = re.compile(r"^[0-9.eE+\-*/<() ]+$")
# a C++ comment (dropped: a commented-out getter is not read) or a string literal (kept as is)
_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|("(?:\\.|[^"\\\n])*")', re.S)

Rule = tuple[str, float | int | None, float | int | None]


def _args(text: str, start: int) -> list[str]:
    """The comma-separated arguments of the call whose `(` ends at `start`, split at depth 0."""
    depth = 0
    args: list[str] = []
    cur: list[str] = []
    for c in text[start:]:
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                args.append("".join(cur).strip())
                return args
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(c)
    raise ValueError("unbalanced call")


def _bound(expr: str) -> float | int | None:
    expr = expr.replace("(int64_t)", "").replace("(uint64_t)", "").replace("(int)", "")
    for name, value in CONSTANTS.items():
        expr = expr.replace(name, value)
    expr = re.sub(r"(\d)f\b", r"\1", expr)
    if not _ARITH.match(expr):
        return None  # a bound this table cannot evaluate: the range is then left unchecked
    value = eval(expr, {"__builtins__": {}})  # digits and operators only (checked above)
    return value if isinstance(value, int | float) else None


def _keys(expr: str) -> list[str]:
    literals = _LITERAL.findall(expr)
    if not literals:
        return []
    literals[0] = literals[0].rstrip("-")  # `"useFP16-" + idxStr`: the indexed form of useFP16
    if expr.startswith("backendPrefix"):
        return [prefix + literals[0] for prefix in BACKENDS]
    if expr.startswith("find("):
        return ["avoidSgf" + literals[0]]
    if expr.startswith('"'):
        return [literals[0]]
    return []


def extract_rules(sources: dict[str, str]) -> tuple[dict[str, Rule], list[str]]:
    """key -> (getter, min, max) from the sources, and a note per key read with two different rules."""
    rules: dict[str, Rule] = {}
    notes: list[str] = []
    for name, source in sources.items():
        text = _COMMENT_OR_STRING.sub(lambda m: m.group(1) or " ", source)
        for match in _CALL.finditer(text):
            getter = match.group(1)
            args = _args(text, match.end())
            lo = _bound(args[1]) if len(args) >= 3 else None
            hi = _bound(args[2]) if len(args) >= 3 else None
            for key in _keys(args[0]):
                rule: Rule = (getter, lo, hi)
                if key in rules and rules[key] != rule:
                    notes.append(f"{key}: {rules[key]} and {rule} ({name}); the first kept")
                    continue
                rules[key] = rule
    return rules, notes


def _read_sources(src: Path) -> dict[str, str]:
    if src.is_dir():
        root = src.parent if src.name == "cpp" else src
        paths = [root / f for f in FILES] + sorted((root / "cpp/neuralnet").glob("*backend.cpp"))
        return {str(p.relative_to(root)): p.read_text(errors="replace") for p in paths}
    out: dict[str, str] = {}
    with tarfile.open(src) as tar:
        for member in tar.getmembers():
            name = member.name.lstrip("./")
            if name in FILES or re.fullmatch(r"cpp/neuralnet/\w*backend\.cpp", name):
                handle = tar.extractfile(member)
                if handle is not None:
                    out[name] = handle.read().decode(errors="replace")
    return dict(sorted(out.items()))


def render_module(rules: dict[str, Rule], version: str, files: list[str]) -> str:
    lines = [
        '"""The value rule of every cfg key KataGo reads: key -> (getter, min, max). GENERATED, do not edit: run',
        f"`python -m benchmarks.katago_cfg_table --src katago-v{version}-cpp-src.tar.gz` (see that script).",
        "",
        f"Source: KataGo v{version}:",
        *(f"  {name}" for name in files),
        "The getter is ConfigParser's (`Int` is getInt: a C++ int read by `istream >>`, then the range checked);",
        "min and max are None where the getter takes no range.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        '__all__ = ["KATAGO_RULES_VERSION", "RULES"]',
        "",
        f'KATAGO_RULES_VERSION = "{version}"',
        "",
        "RULES: dict[str, tuple[str, float | int | None, float | int | None]] = {",
    ]
    lines += [f"    {key!r}: ({getter!r}, {lo!r}, {hi!r})," for key, (getter, lo, hi) in sorted(rules.items())]
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, required=True, help="KataGo's cpp source tarball or unpacked folder")
    parser.add_argument("--version", default="1.17.2", help="the KataGo version of that source")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "kgserve/katago/cfg_keys.py")
    args = parser.parse_args(argv)
    sources = _read_sources(args.src)
    rules, notes = extract_rules(sources)
    args.out.write_text(render_module(rules, args.version, list(sources)))
    for note in notes:
        print("note:", note)
    print(f"{len(rules)} keys from {len(sources)} files -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
