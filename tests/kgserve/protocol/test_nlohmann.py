"""kgserve.katago._nlohmann: nlohmann 3.8's parse and dump as KataGo uses them (expected texts: a real KataGo's).

The texts KataGo prints for whole hostile lines are replayed in tests/kgserve/sim/test_hostile_lines.py.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgserve.katago._nlohmann import NlohmannError, loads, nlohmann_int, nlohmann_int64, parse
from kgserve.katago._nlohmann_dump import dump


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2**64, "1.8446744073709552e+19"),
        (2**64 - 1, "18446744073709551615"),
        (-(2**63) - 1, "-9.223372036854776e+18"),
        (123456789012345678901234567890, "1.2345678901234568e+29"),
        (1e15, "1e+15"),
        (1.5e15, "1.5e+15"),
        (-1234567890123456.0, "-1.234567890123456e+15"),
        (999999999999999.9, "999999999999999.9"),
        (1e16, "1e+16"),
        (1e-5, "1e-05"),
        (0.0001, "0.0001"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        ({"b": [1, {"d": None, "c": True}], "a": "é\n\x01"}, '{"a":"é\\n\\u0001","b":[1,{"c":true,"d":null}]}'),
    ],
)
def test_dump_prints_as_nlohmann(value: object, text: str) -> None:
    assert dump(value) == text


def test_parse_keeps_nlohmanns_values() -> None:
    assert parse(b"[18446744073709551615,18446744073709551616,-9223372036854775808,-9223372036854775809,-0]") == [
        2**64 - 1,
        float(2**64),
        -(2**63),
        float(-(2**63) - 1),
        0,
    ]
    assert parse(b'{"a":1,"b":2,"a":3}') == {"a": 3, "b": 2}  # the last of duplicate keys wins
    assert parse(b'\xef\xbb\xbf {"id":"x"}\x00 anything \xff') == {"id": "x"}  # a NUL byte ends the input
    assert parse(b'"\\ud83d\\ude00\\u00e9\\/"') == "\U0001f600é/"


def test_parse_and_dump_have_no_depth_limit() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    assert dump(parse(deep)) == deep.decode()
    with pytest.raises(NlohmannError, match=r"column 100001: syntax error while parsing value - unexpected end"):
        parse(b"[" * 100_000)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"id":"a"} x', "column 12: syntax error while parsing value - invalid literal; last read: '\"a\"} x'"),
        (b"[1, tru]", "column 8: syntax error while parsing value - invalid literal; last read: '1, tru]'"),
        (b'{"id":"a\x00bc"}', "column 9: syntax error while parsing value - invalid string: control character U+0000"),
        (b'\x00{"id":"x"}', "column 1: syntax error while parsing value - unexpected end of input; expected '['"),
        (b"[01]", "column 3: syntax error while parsing array - unexpected number literal; expected ']'"),
        (b"\xef\xbb\xbfzz", "column 4: syntax error while parsing value - invalid literal; last read: '\ufeffz'"),
        (b"[1e400]", "[json.exception.out_of_range.406] number overflow parsing '1e400'"),
    ],
)
def test_parse_errors_are_katagos(line: bytes, message: str) -> None:
    with pytest.raises(NlohmannError) as caught:
        parse(line)
    assert message in caught.value.message
    with pytest.raises(NlohmannError) as again:  # the fast path hands it to the port
        loads(line)
    assert again.value.message == caught.value.message


def test_casts_are_x86_cpp_casts() -> None:
    assert [nlohmann_int(v) for v in (2**32, 2**32 + 1, -(2**63), 2**64 - 1, 2.9, -2.9, 1e10, True)] == [
        0,
        1,
        0,
        -1,
        2,
        -2,
        -(2**31),
        1,
    ]
    assert [nlohmann_int64(v) for v in (2**63, 2**64 - 5, 4.0e18, -2.9, 1e19, -1e30, float(2**64))] == [
        -(2**63),
        -5,
        4 * 10**18,
        -2,
        -(2**63),
        -(2**63),
        -(2**63),
    ]


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=20,
)


@given(JSON, st.booleans())
def test_the_fast_path_reads_what_the_port_reads(value: object, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", errors="surrogatepass")
    try:
        expected = parse(text)
    except NlohmannError as error:  # lone surrogates: escaped or as bytes
        with pytest.raises(NlohmannError) as again:
            loads(text)
        assert again.value.message == error.message
        return
    assert loads(text) == expected
    assert dump(expected) == dump(loads(dump(expected).encode("utf-8")))
