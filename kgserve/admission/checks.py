"""The checks a query passes before it reaches the engine, the same for POST /analysis and for /ws.

- `classify_safely`: a request line as KataGo's request loop would take it (kgserve.katago.protocol.classify_line),
  moves left undecoded; a line it cannot handle is refused with an error line instead of failing the request.
  `classify_all` does it for a body's lines, on a thread of its own for a body over OFF_LOOP_BYTES.
- `check_query`, the per-query caps (visible to the client as an error line for that query, or a clamp):
  - a search over `limits.max_visits` visits -> an error line naming the cap (`reject`), or the query runs with
    `maxVisits` = the cap (`clamp`: HTTP answers with `X-Visits-Clamped`, /ws with a warning line). The visits
    counted are the ones KataGo will search with: the query's `maxVisits`, else an `overrideSettings`
    `maxVisits` (an empty string there removes the bound: unbounded), else the cfg's `maxVisits`;
  - `analyzeTurns` longer than `limits.max_turns_per_query` -> an error line for that query;
  - `analyzeTurns: []`: KataGo analyses no turn and writes no line at all for such a query, so nothing could
    tell when it is finished: kgserve does not send it and it contributes no line to the response (so a
    KataGo error for an otherwise invalid query with no turns is not reported either);
  - `reportDuringSearchEvery` under `limits.min_report_interval_s` -> KataGo's own error line for the field,
    with kgserve's floor in place of KataGo's 0.001 (`Must be number of seconds from 0.1 to 1000000.0`);
  - a rules string whose komi is not an integer or half-integer (legacy form, e.g. `scoreAREAkomi0.25`, and no
    top-level `komi`) -> an error line for that query: KataGo v1.17.2 accepts it and then exits on a failed
    assert when a search scores a finished game, killing every query in flight on that engine (a rules string
    holding komi and longer than 128 characters is refused unparsed).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from kgserve.katago.protocol import VISITS_UNBOUNDED, Query, Rejected, classify_line, error_line
from kgserve.katago.rules import is_int_or_half_int, parse_rules
from kgserve.settings import LimitsSettings

__all__ = [
    "MAX_KOMI_RULES_CHARS",
    "OFF_LOOP_BYTES",
    "CheckedQuery",
    "check_query",
    "check_report_interval",
    "check_rules_komi",
    "classify_all",
    "classify_safely",
    "search_visits",
]

log = logging.getLogger("kgserve.intake")


def classify_safely(line: bytes) -> Query | Rejected:
    """protocol.classify_line (moves left undecoded), but a line it cannot handle is refused instead of failing
    the request."""
    try:
        return classify_line(line, defer_moves=True)  # the engine gets the line's bytes: no move is read here
    except Exception as exc:  # e.g. RecursionError on pathological nesting: never a 500
        log.warning("cannot classify a request line of %d bytes: %s: %s", len(line), type(exc).__name__, exc)
        preview = line[:80].decode("utf-8", errors="replace")
        return Rejected(error_line(f"kgserve: cannot parse this request line ({type(exc).__name__}): {preview}"))


# A body (or WebSocket message) bigger than this is classified on a thread of its own instead of the event loop:
# a malformed 1 MiB line costs 0.06-0.5 s and one nested 500,000 levels deep ~1.2 s of Python (the nlohmann port
# finds KataGo's error text), during which the loop would answer nobody; on the thread the loop runs between the
# interpreter's switches (every 5 ms). One thread per process: with the GIL, more would only share it.
OFF_LOOP_BYTES = 64 << 10
_parser: ThreadPoolExecutor | None = None


async def classify_all(lines: list[bytes], total_bytes: int) -> list[Query | Rejected]:
    """classify_safely for each line: on the event loop for a small body, on the parse thread for a big one."""
    if total_bytes <= OFF_LOOP_BYTES:
        return [classify_safely(line) for line in lines]
    global _parser
    if _parser is None:
        _parser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgserve-parse")
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_parser, _classify_each, lines)


def _classify_each(lines: list[bytes]) -> list[Query | Rejected]:
    return [classify_safely(line) for line in lines]


@dataclass(frozen=True, slots=True)
class CheckedQuery:
    query: Query
    clamped: bool = False
    silent: bool = False  # KataGo writes nothing at all for it (`analyzeTurns: []`): not sent to the engine


def search_visits(query: Query, cfg_visits: int | None) -> int:
    """The visits KataGo will search this query with: its own bound, else the cfg's (none: unbounded)."""
    if query.visits is not None:
        return query.visits
    return cfg_visits if cfg_visits is not None else VISITS_UNBOUNDED


def check_query(query: Query, limits: LimitsSettings, cfg_visits: int | None) -> CheckedQuery | Rejected:
    """Apply the per-query caps: an error line naming the cap, or the (possibly clamped) query.

    `cfg_visits` is the served cfg's `maxVisits` (None: the cfg sets none, so KataGo searches unbounded)."""
    turns = query.body.get("analyzeTurns")
    if isinstance(turns, list) and not turns:
        return CheckedQuery(query, silent=True)
    if isinstance(turns, list) and len(turns) > limits.max_turns_per_query:
        message = (
            f"kgserve: analyzeTurns has {len(turns)} entries, over the limit of "
            f"{limits.max_turns_per_query} (limits.max_turns_per_query)"
        )
        return Rejected(error_line(message, caller_id=query.caller_id, field="analyzeTurns"), query.caller_id)
    refused = check_rules_komi(query) or check_report_interval(query, limits.min_report_interval_s)
    if refused is not None:
        return refused
    visits = search_visits(query, cfg_visits)
    if visits > limits.max_visits:
        if limits.visits_over_cap == "reject":
            message = (
                f"kgserve: {_visits_source(query)} {visits} is over the cap of {limits.max_visits} (limits.max_visits)"
            )
            return Rejected(error_line(message, caller_id=query.caller_id, field="maxVisits"), query.caller_id)
        # a top-level maxVisits overrides overrideSettings and the cfg in KataGo
        body = dict(query.body)
        body["maxVisits"] = limits.max_visits
        return CheckedQuery(replace(query, body=body, visits=limits.max_visits, raw=None), clamped=True)
    return CheckedQuery(query)


# Longest legacy rules string worth parsing on the event loop: every real one is under 64 characters
# ("koPOSITIONALscoreAREAtaxNONEsui1button1whbN-1fpok1komi7.5"); parsing 128 takes well under a millisecond.
MAX_KOMI_RULES_CHARS = 128
_KOMI_CRASH = "KataGo v1.17.2 accepts it and then crashes when a search scores a finished game"


def check_rules_komi(query: Query) -> Rejected | None:
    """An error line when the query's rules would give KataGo a komi that is not an integer or half-integer.

    Only the legacy rules string can: KataGo checks the komi of a rules object, of a JSON string and of a
    top-level `komi` (which replaces the rules' komi), but takes any finite legacy komi up to 1e5 and then fails
    an assert in nninputs.cpp once a search scores a finished game, which ends the engine process. Cheap on the
    hot path: only a rules string holding "komi" without a top-level komi is looked at, and one longer than
    MAX_KOMI_RULES_CHARS is refused unparsed."""
    rules = query.body.get("rules")
    if not isinstance(rules, str) or "komi" not in rules or "komi" in query.body:
        return None
    if len(rules) > MAX_KOMI_RULES_CHARS:
        message = (
            f"kgserve: refused: a rules string holding komi is limited to {MAX_KOMI_RULES_CHARS} characters "
            f"(kgserve checks that its komi is an integer or half-integer: on any other, {_KOMI_CRASH})"
        )
        return Rejected(error_line(message, caller_id=query.caller_id, field="rules"), query.caller_id)
    parsed = parse_rules(rules)
    if parsed is None or is_int_or_half_int(parsed.komi):
        return None  # KataGo's own "Could not parse rules" error, or a komi it scores safely
    message = (
        f"kgserve: refused: these rules give komi {parsed.komi:g}, which is not an integer or half-integer; "
        f"{_KOMI_CRASH} (use a half-integer komi, or a top-level komi)"
    )
    return Rejected(error_line(message, caller_id=query.caller_id, field="rules"), query.caller_id)


REPORT_INTERVAL_FIELD = "reportDuringSearchEvery"


def check_report_interval(query: Query, floor_s: float) -> Rejected | None:
    """KataGo's error line for `reportDuringSearchEvery` when the query asks for partial results more often than
    every `floor_s` seconds (KataGo's own floor is 0.001 s: the text is KataGo's with kgserve's floor)."""
    value = query.body.get(REPORT_INTERVAL_FIELD)
    if not (type(value) is float or type(value) is int) or value >= floor_s:
        return None  # not there, or not a number (KataGo's own error), or often enough
    message = f"Must be number of seconds from {floor_s:g} to 1000000.0"
    return Rejected(error_line(message, caller_id=query.caller_id, field=REPORT_INTERVAL_FIELD), query.caller_id)


def _visits_source(query: Query) -> str:
    if type(query.body.get("maxVisits")) is int:
        return "maxVisits"
    if query.visits is not None:
        return "overrideSettings maxVisits"
    return "the cfg's maxVisits (the query sets none)"
