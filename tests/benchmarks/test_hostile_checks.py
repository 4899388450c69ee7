"""The hostile benchmark's own checks (benchmarks/hostile_attacks/)."""

from __future__ import annotations

from typing import Any

from benchmarks.hostile_attacks.fairness import PROBE_INFLIGHT, within_share
from benchmarks.hostile_attacks.ws_attacks import SHUTDOWN_TEXT, drain_answers


def test_slot_hog_share_allows_the_probes_one_query() -> None:
    # kgserve_inflight_queries is server-wide: the attacker at its cap of 512 plus the probe's one query read 513
    # in the 2026-11-25 run, which the check took for a broken cap
    assert within_share(512 + PROBE_INFLIGHT, 512)
    assert within_share(100, 512)
    assert not within_share(512 + PROBE_INFLIGHT + 1, 512)


def test_drain_counts_queries_refused_at_admission_as_told() -> None:
    # 120 queries on one connection: past websocket.max_inflight_per_connection (64) they are refused when sent,
    # which the 2026-11-25 run's check did not count
    lines: list[dict[str, Any]] = [
        {"id": "a", "isDuringSearch": False},
        {"id": "b", "error": SHUTDOWN_TEXT},
        {"id": "c", "error": "kgserve: over the limit of 64 queries in flight on this connection"},
        {"id": "d", "isDuringSearch": True},
    ]
    finals, cut, refused = drain_answers(lines)
    assert (finals, cut, refused) == ({"a"}, {"b"}, {"c"})
