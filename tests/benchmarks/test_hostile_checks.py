"""The hostile benchmark's own checks (benchmarks/hostile_attacks/)."""

from __future__ import annotations

import asyncio
from typing import Any

from benchmarks.hostile_attacks.fairness import PROBE_INFLIGHT, open_part, within_share
from benchmarks.hostile_attacks.flooder import ANSWER, FloodCounts, read_answers
from benchmarks.hostile_attacks.floods import flood_verdict
from benchmarks.hostile_attacks.ws_attacks import SHUTDOWN_TEXT, drain_answers


def test_slot_hog_share_allows_the_probes_one_query() -> None:
    # kgserve_inflight_queries is server-wide: the attacker at its cap of 512 plus the probe's one query read 513
    # in the 2026-11-25 run, which the check took for a broken cap
    assert within_share(512 + PROBE_INFLIGHT, 512)
    assert within_share(100, 512)
    assert not within_share(512 + PROBE_INFLIGHT + 1, 512)


def test_slot_hog_alone_is_held_to_the_part_open_to_one_client() -> None:
    # issue 40: a client alone may pass its per-client cap; the last 1/8 of the server-wide bound stays for others
    assert open_part(2048) == 1792
    assert within_share(1792 + PROBE_INFLIGHT, open_part(2048)) and not within_share(1794, open_part(2048))


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


def test_flood_verdict_counts_a_stall_the_median_hides() -> None:
    alone = [0.05] * 10
    assert flood_verdict(alone, [0.06] * 10, [0.01, 0.05])["victim within 2x alone"]
    # issue 36 on main: most of the victim's queries between two stalls were quick, one waited 26 s
    stalled = flood_verdict(alone, [0.06] * 13 + [26.0], [0.01, 22.0])
    assert not stalled["victim within 2x alone"] and not stalled["/healthz under 100 ms"]


async def test_the_flooder_counts_answers_split_across_reads_and_kgserves_other_texts() -> None:
    reader = asyncio.StreamReader()
    answer = b'{"error":"could not parse"}'
    notice = b'{"error":"kgserve: over the limit"}'
    stream = b"\x81\x1b" + answer + b"\x81\x23" + notice + (b"\x81\x1b" + answer) * 3
    counts = FloodCounts()
    reading = asyncio.create_task(read_answers(reader, counts, [], ANSWER))
    cut = len(stream) - len(answer) + 4  # inside the last answer's opening bytes
    for piece in (stream[:cut], stream[cut:]):
        reader.feed_data(piece)
        await asyncio.sleep(0.01)  # read apart
    reader.feed_eof()
    await reading
    assert counts.answers == 5 and counts.texts == {"kgserve: over the limit": 1}
