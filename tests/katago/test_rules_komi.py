"""The real KataGo behind `python -m kgserve` (backend eigen) survives a query whose legacy rules string gives a
komi that is not a half-integer: kgserve refuses it (sent as is, KataGo v1.17.2 exits on a failed assert once
the search scores a finished game). The checks are tests/kgserve/http/test_rules_komi.py's, then the engine's pid in
/readyz is the same as before and a valid query is still analysed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers.hostile_checks import (
    check_non_half_integer_legacy_komi_gets_an_error_line,
    check_other_queries_of_the_request_are_analysed,
)
from tests.katago.conftest import RealKatago, start_kgserve, tier_config

pytestmark = pytest.mark.katago


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, real_katago: RealKatago) -> Iterator[Any]:
    process = start_kgserve(tier_config(tmp_path_factory.mktemp("kgserve-katago"), real_katago))
    yield process
    process.stop()


def engine_pids(server: Any) -> list[int]:
    readyz = httpx.get(server.url + "/readyz", timeout=10).json()
    assert readyz["ready"] is True
    return [engine["pid"] for engine in readyz["engines"]]


def test_engine_survives_non_half_integer_legacy_komi(server: Any) -> None:
    before = engine_pids(server)
    assert all(isinstance(pid, int) for pid in before)
    check_non_half_integer_legacy_komi_gets_an_error_line(server)
    check_other_queries_of_the_request_are_analysed(server)
    assert engine_pids(server) == before
