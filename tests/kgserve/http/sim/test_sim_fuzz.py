"""A hypothesis fuzz of POST /analysis bodies against kgserve with the simulated engine.

Bytes, invalid UTF-8, deep nesting, huge analyzeTurns, absurd numbers, unicode ids, ids that look like
kgserve's internal ids (kgq<N>): never a 5xx, every request answered within seconds, and the engine
process that started is still the one serving afterwards (no crash, no restart).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import analysis_query

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    config = config_writer(tmp_path_factory.mktemp("kgserve"), limits={"max_visits": 1000})
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "200"})
    process.wait_listening()
    process.wait_ready()
    process.first_engine_pids = process.child_pids()
    yield process
    process.stop()


def _nested(depth: int) -> bytes:
    return b'{"id":"deep","moves":' + b"[" * depth + b"]" * depth + b"}"


_numbers = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["1e999", "-1e999", "NaN", "-0", "1E400", "0.0000001"]),
)


def _number_query(field: str, value: Any) -> bytes:
    text = json.dumps(analysis_query("num", moves=[["B", "Q4"]], max_visits=5))
    literal = value if isinstance(value, str) else json.dumps(value)
    return text[:-1].encode() + b',"' + field.encode() + b'":' + literal.encode() + b"}"


def _query_with_id(caller_id: str) -> bytes:
    return json.dumps(analysis_query(caller_id, max_visits=5), ensure_ascii=False).encode()


bodies = st.one_of(
    st.binary(max_size=3000),
    st.binary(min_size=1, max_size=50).map(lambda raw: b'{"id":"' + raw + b'","moves":[],"maxVisits":5}'),
    st.integers(min_value=1, max_value=200_000).map(_nested),
    st.integers(min_value=0, max_value=60_000).map(
        lambda n: json.dumps(analysis_query("turns", max_visits=5, analyzeTurns=list(range(n)))).encode()
    ),
    st.tuples(
        st.sampled_from(
            [
                "komi",
                "maxVisits",
                "boardXSize",
                "boardYSize",
                "analyzeTurns",
                "priority",
                "reportDuringSearchEvery",
                "rootPolicyTemperature",
            ]
        ),
        _numbers,
    ).map(lambda pair: _number_query(*pair)),
    st.text(max_size=40).map(_query_with_id),
    st.sampled_from(["kgq1", "kgq2", "kga1", "kgq999999", "kgq0", ""]).map(_query_with_id),
    st.lists(st.text(max_size=20).map(_query_with_id), min_size=2, max_size=5).map(b"\n".join),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(body=bodies)
def test_fuzz_analysis_bodies(server: Any, body: bytes) -> None:
    response = httpx.post(server.url + "/analysis", content=body, timeout=30)
    assert response.status_code in (200, 400, 413), (response.status_code, response.text[:500], body[:200])
    for line in response.content.splitlines():
        json.loads(line)  # every response line is JSON


def test_hostile_bodies_leave_the_engine_serving(server: Any) -> None:
    """Runs after the fuzz (module order): the engine that started is still the one serving."""
    (pid,) = server.first_engine_pids
    big = b'{"id":"big","moves":[],"pad":"' + b"x" * (10 * 1024 * 1024) + b'"}'
    assert httpx.post(server.url + "/analysis", content=big, timeout=60).status_code == 413
    readyz = httpx.get(server.url + "/readyz", timeout=10).json()
    assert readyz["ready"] is True and readyz["engines"][0]["pid"] == pid and readyz["engines"][0]["restarts"] == 0
    short = json.dumps(analysis_query("short", moves=[["B", "Q4"]], max_visits=20)).encode()
    after = httpx.post(server.url + "/analysis", content=short, timeout=10)
    assert after.status_code == 200 and json.loads(after.content)["id"] == "short"
