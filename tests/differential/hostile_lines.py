"""Hand-picked hostile request lines and what a real KataGo v1.17.2 answered to them, for CI without the binary.

One line or more for each class where the sim once answered otherwise (issue 27): what nlohmann quotes as the last
token read, a NUL byte (it ends nlohmann's input outside a string), integers past int64/uint64 (doubles, printed
as nlohmann prints them), `priority`/`priorities` out of range, a `humanSLProfile` the net does not use, and lines
nested thousands of levels deep. `tests/kgserve/sim/test_hostile_lines.py` replays them through the sim against the
recorded answers; the katago tier replays them through the real engine too.

Record again (the answers without analysis lines, in order, the net's path written `<model>`, the cfg's `<cfg>`):

    KGBENCH_KATAGO_BIN=... KGBENCH_KATAGO_MODEL=... PYTHONPATH=. python -m tests.differential.hostile_lines
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from tests.conftest import REPO

__all__ = ["ANSWERS", "LINES", "answers_without_analysis"]

ANSWERS = REPO / "tests" / "differential" / "hostile_lines.out.jsonl"
_QUERY = b'"boardXSize":3,"boardYSize":3,"rules":"chinese","moves":[],"maxVisits":1'


def _query(case_id: str, extra: bytes = b"") -> bytes:
    return b'{"id":"' + case_id.encode() + b'",' + _QUERY + extra + b"}"


LINES: list[bytes] = [
    # the last token read: every byte since the last string or number began
    b'{"id":"a"} x',
    b'{"id":"x","komi":NaN}',
    b"[1, tru]",
    b'{"a" : 1.5e}',
    b"  [1,2,3 x",
    b'{"id":"abc',
    b'{"id":"a",',
    b"nul",
    b"[-]",
    b"[1.]",
    b"[1e+]",
    b"[01]",
    b'["\\u12"]',
    b'["\\ud800"]',
    b'["\\udc00"]',
    b'["\\ud800\\u0041"]',
    b'["a\tb"]',
    b'{"id":"x"}}',
    b"\xef\xbb\xbf[1,",
    b"\xef\xbb\xbfzz",
    b'\xef\xbb\xbf{"id":5}',
    # a NUL byte ends the input outside a string; inside one it is a control character
    b'\x00{"id":"x"}',
    b'{"id":"a\x00bc"}',
    b"[1,\x002]",
    b"tru\x00e",
    b"[1]\x00junk",
    _query("nul-ends-the-query") + b"\x00junk\xff",
    _query("rules-json-nul-ends").replace(b'"chinese"', b'"{\\"ko\\":\\"SIMPLE\\",\\"komi\\":6.5}\\u0000 junk"'),
    # numbers past int64/uint64, doubles near 10^15
    b"[18446744073709551616]",
    b"[18446744073709551615,-9223372036854775809,1e20,1.0,123456789012345678901234567890,1e15,1.5e15,1e16,1e-5,-0.0]",
    b'{"id":"echo","action":"clear_cache","big":18446744073709551616,"f":[1e15,999999999999999.9,1234567890123456]}',
    b'{"id":"x","komi":1e400}',
    b"[" + b"9" * 400 + b"]",
    _query("priority-uint64-wraps", b',"priority":18446744073709551611'),
    _query("priority-2^64", b',"priority":18446744073709551616'),
    _query("priorities-4e18", b',"analyzeTurns":[0],"priorities":[4.0e18]'),
    _query("priorities-4.7e18", b',"analyzeTurns":[0],"priorities":[4.7e18]'),
    _query("priorities-1e19", b',"analyzeTurns":[0],"priorities":[1e19]'),
    _query("priorities-2^64", b',"analyzeTurns":[0],"priorities":[18446744073709551616]'),
    _query("priorities-2^63", b',"analyzeTurns":[0],"priorities":[9223372036854775808]'),
    _query("priorities--1e30", b',"analyzeTurns":[0],"priorities":[-1e30]'),
    _query("size-uint64", b',"boardXSize":18446744073709551615'),
    _query("rules-big-komi").replace(b'"rules":"chinese"', b'"rules":{"komi":18446744073709551616}'),
    _query("override-big", b',"overrideSettings":{"maxVisits":18446744073709551616}'),
    _query("override-sorted", b',"overrideSettings":{"maxVisits":{"b":1e15,"a":2}}'),
    # a humanSLProfile the net does not use: the unknown-keys warning, then the error naming the net
    _query("human-rank", b',"overrideSettings":{"humanSLProfile":"rank_3d"}'),
    _query("human-rank-and-unknown", b',"overrideSettings":{"humanSLProfile":"preaz_1d_2k","fooBar":1}'),
    _query("human-year", b',"overrideSettings":{"humanSLProfile":"proyear_ +2000"}'),
    _query("human-unknown", b',"overrideSettings":{"humanSLProfile":"rank_30k","fooBar":1}'),
    # nested thousands of levels: one answer, and the engine goes on
    b"[" * 5000 + b"]" * 5000,
    b'{"id":"deep","x":' + b"[" * 5000 + b"]" * 5000 + b"}",
    _query("deep-unknown-field", b',"deep":' + b"[" * 20000 + b"]" * 20000),
    b"[" * 20000,
    b'{"a":' * 3000 + b"1" + b"}" * 2999,
    _query("still-answering"),
]


def answers_without_analysis(stdout: list[str], model: str, cfg: Path) -> list[str]:
    """What is compared: every line but the analyses (their numbers and order vary), with the net's and the cfg's
    paths written `<model>` and `<cfg>`."""
    kept = [line for line in stdout if '"isDuringSearch"' not in line]
    return [line.replace(model, "<model>").replace(str(cfg), "<cfg>") for line in kept]


def main() -> int:
    from tests.differential.engines import katago_spec, run_lines, write_cfg

    binary, model = os.environ.get("KGBENCH_KATAGO_BIN"), os.environ.get("KGBENCH_KATAGO_MODEL")
    if not binary or not model:
        print("set KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kghostile-") as tmp:
        lines = [line.decode("utf-8", errors="surrogateescape") for line in LINES]
        stdout = run_lines(katago_spec(Path(tmp), binary, model), lines, 600.0)
        answers = answers_without_analysis(stdout, model, write_cfg(Path(tmp)))
    ANSWERS.write_text("".join(line + "\n" for line in answers))
    print(f"{len(stdout)} lines, written to {ANSWERS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
