"""Waiting on a running kgserve from a test: a query that runs until terminated, a bounded wait for a condition."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.conftest import analysis_query


def long_query(caller_id: str, visits: int = 1_000_000) -> bytes:
    return json.dumps(analysis_query(caller_id, max_visits=visits)).encode()


def wait_for(condition: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
