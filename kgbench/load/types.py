"""Data types of the load generator (public API for kgbench's job runner).

Entry point: ``kgbench.load.generator.run_load(target, load, queries, progress) -> LoadResult``.

Load settings (``conf/load/*.yaml`` keys, defaults in brackets):

- ``concurrency`` [16, 64, 256]: closed loop: one level per value, that many requests in flight.
  Open loop: the largest value caps the requests in flight (arrivals over the cap count as ``overload`` errors).
- ``mode`` [closed]: ``closed`` (each worker sends its next request when the previous one finished) or
  ``open`` (Poisson arrivals at ``rate``; latency measured from the intended send time: no coordinated omission).
- ``rate`` [100.0]: open loop only, mean arrivals per second.
- ``warmup_s`` [2.0]: per level, requests completed during warmup are recorded but excluded from the summaries.
  Warmup lasts at least until the first min(concurrency, 8) requests came back (at most request_timeout_s more).
- ``window_s`` [2.0]: measurement window length.
- ``min_windows`` [3]: measure at least this many windows.
- ``max_windows`` [10]: stop after this many windows even if not stable; the level (and the run) is flagged unstable.
- ``tolerance`` [0.1]: the last ``min_windows`` windows agree when (max - min) / mean of their req/s <= tolerance
  (a window in which no request completed never agrees).
- ``max_visits`` [50]: ``maxVisits`` put into every query; null: none (the cfg's ``maxVisits`` applies, as a client
  that sends none gets; load=batch).
- ``request_timeout_s`` [60.0]: client-side timeout per request (error kind ``timeout``).
- ``seed`` [0]: traffic order and Poisson arrivals.
- ``max_loop_lag_ms`` [100.0]: self-watch: the run is invalid when the load generator's event loop lags more than
  this (p99 of 50 ms probes during measurement).
- ``max_cpu_share`` [0.9]: self-watch: the run is invalid when the load generator's own process used more than this
  share of one core during measurement.
- ``slo_ms`` [1500.0]: latency objective of goodput: successful responses per second that finished within it.
- ``repeats`` [1]: measure each level this many times (each with its own warmup); the req/s interval then comes
  from the repeats' means instead of the windows (kgbench.load.interval).
- ``ladder`` [fixed]: ``fixed`` runs exactly ``concurrency``; ``auto`` starts at its first value and doubles
  until req/s stops rising beyond noise (the new level's interval overlaps the best level's), p99 passes
  ``max_p99_ms``, or ``max_concurrency`` is reached (kgbench.load.ladder). Closed loop only.
- ``max_concurrency`` [1024]: ``ladder: auto``: the highest level it may reach.
- ``max_p99_ms`` [null]: ``ladder: auto``: stop once a level's p99 exceeds this (null: no latency bound).
- ``order`` [given]: ``ladder: fixed``: ``given`` runs the levels as listed, ``descending`` the highest first (what
  an Optuna search uses: the first level then already measures the job's likely best req/s, so the pruner's
  first comparison is a fair one; see docs/sweeps.md).
- ``query_fields`` [{}]: fields set in every query on top of the position, e.g. ``{includePolicy: true,
  includeOwnership: true}`` (load=policy); ``id`` and ``maxVisits`` are the generator's own.
- ``traffic`` [distinct]: what a request is (kgbench.load.kinds): ``distinct`` one position nobody sent before,
  ``review`` one whole game with ``analyzeTurns`` over every turn, ``interactive`` a player stepping through a game
  a move at a time (one query in flight per worker, ``reportDuringSearchEvery``), ``mixed`` the workers shared out
  by ``mix``, ``batch`` a bulk client's positions in file order, one a query, all workers one stream
  (kgbench.load.batch). Every kind is measured in analysed turns/s beside requests/s; ``distinct`` decides its
  windows by requests (one turn each), the others by turns (a review's request is a whole game).
- ``games`` [null]: what the traffic is built from: ``samples`` (the five sample queries: assets/analysis/inputs and
  the reference samples), ``selfplay`` (the real games of assets/analysis/games), null: ``samples`` for
  ``distinct`` (its positions as before), ``selfplay`` for the rest.
- ``mix`` [{review: 0.2, interactive: 0.6, distinct: 0.2}]: ``traffic: mixed``: each level's workers shared out
  in this ratio (largest remainders); stated, not measured (docs/traffic.md).
- ``report_every_s`` [0.5]: ``interactive``: the ``reportDuringSearchEvery`` of its queries (null: none, a client
  that sends one position at a time and waits for its answer: DodaGames' baseline against whole-game requests).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

Mode = Literal["closed", "open"]
TrafficKind = Literal["distinct", "review", "interactive", "mixed", "batch"]
GameSet = Literal["samples", "selfplay"]
Ladder = Literal["fixed", "auto"]
Order = Literal["given", "descending"]

# Error kinds of a request record (``RequestRecord.error``); None = success.
ERROR_KINDS = (
    "timeout",  # no complete response within request_timeout_s
    "connect",  # connection refused / reset before a response
    "disconnect",  # the response stream broke off
    "overload",  # 429, or open loop: arrival found max concurrency in flight
    "unavailable",  # 503
    "client_error",  # other 4xx
    "server_error",  # other 5xx
    "engine_error",  # 200 but the engine answered with an error line
    "bad_response",  # 200 but no parsable final analysis
    "missing_turns",  # 200 but some turn asked for had no final line, or one twice (kgbench.load.turns)
    "client_exception",  # the load generator itself raised (recorded as "client_exception:<ExceptionType>")
)


@dataclass(frozen=True)
class LoadSettings:
    """How to load the target; see the module docstring for the meaning and defaults of every key."""

    concurrency: tuple[int, ...] = (16, 64, 256)
    mode: Mode = "closed"
    rate: float = 100.0
    warmup_s: float = 2.0
    window_s: float = 2.0
    min_windows: int = 3
    max_windows: int = 10
    tolerance: float = 0.1
    max_visits: int | None = 50
    request_timeout_s: float = 60.0
    seed: int = 0
    max_loop_lag_ms: float = 100.0
    max_cpu_share: float = 0.9
    slo_ms: float = 1500.0
    repeats: int = 1
    ladder: Ladder = "fixed"
    max_concurrency: int = 1024
    max_p99_ms: float | None = None
    order: Order = "given"
    query_fields: Mapping[str, Any] = field(default_factory=dict)
    traffic: TrafficKind = "distinct"
    games: GameSet | None = None
    mix: Mapping[str, float] = field(default_factory=lambda: {"review": 0.2, "interactive": 0.6, "distinct": 0.2})
    report_every_s: float | None = 0.5

    def __post_init__(self) -> None:
        if not self.concurrency or any(int(c) < 1 for c in self.concurrency):
            raise ValueError(f"load.concurrency must be a non-empty list of positive ints, got {self.concurrency!r}")
        if self.mode not in ("closed", "open"):
            raise ValueError(f"load.mode must be 'closed' or 'open', got {self.mode!r}")
        if self.mode == "open" and self.rate <= 0:
            raise ValueError(f"load.rate must be > 0 in open mode, got {self.rate!r}")
        if self.window_s <= 0 or self.warmup_s < 0:
            raise ValueError("load.window_s must be > 0 and load.warmup_s >= 0")
        if self.min_windows < 1 or self.max_windows < self.min_windows:
            raise ValueError("load.min_windows must be >= 1 and load.max_windows >= load.min_windows")
        visits_ok = self.max_visits is None or self.max_visits >= 1
        if not visits_ok or self.request_timeout_s <= 0 or self.tolerance < 0:
            raise ValueError(
                "load.max_visits >= 1 or null, load.request_timeout_s > 0 and load.tolerance >= 0 required"
            )
        reserved = sorted({"id", "maxVisits"} & set(self.query_fields))
        if reserved:
            raise ValueError(f"load.query_fields must not set {reserved}: the generator sets them (load.max_visits)")
        if not self.slo_ms > 0 or self.repeats < 1:
            raise ValueError(f"load.slo_ms must be > 0 and load.repeats >= 1, got {self.slo_ms!r}, {self.repeats!r}")
        if self.ladder not in ("fixed", "auto"):
            raise ValueError(f"load.ladder must be 'fixed' or 'auto', got {self.ladder!r}")
        if self.ladder == "auto" and self.mode != "closed":
            raise ValueError("load.ladder=auto needs load.mode=closed (an open loop has one level)")
        if self.ladder == "auto" and self.max_concurrency < self.concurrency[0]:
            raise ValueError(
                f"load.max_concurrency ({self.max_concurrency}) is below the first level ({self.concurrency[0]})"
            )
        if self.order not in ("given", "descending"):
            raise ValueError(f"load.order must be 'given' or 'descending', got {self.order!r}")
        if self.order == "descending" and self.ladder == "auto":
            raise ValueError(
                "load.order=descending needs load.ladder=fixed (the auto ladder climbs from the first level)"
            )
        if self.max_p99_ms is not None and not self.max_p99_ms > 0:
            raise ValueError(f"load.max_p99_ms must be > 0 or null, got {self.max_p99_ms!r}")
        self._check_traffic()

    def _check_traffic(self) -> None:
        kinds = ("distinct", "review", "interactive", "mixed", "batch")
        if self.traffic not in kinds:
            raise ValueError(f"load.traffic must be one of {', '.join(kinds)}, got {self.traffic!r}")
        if self.games not in (None, "samples", "selfplay"):
            raise ValueError(f"load.games must be samples, selfplay or null, got {self.games!r}")
        if self.traffic in ("interactive", "mixed") and self.mode != "closed":
            raise ValueError(f"load.traffic={self.traffic} needs load.mode=closed (a player has one query in flight)")
        if self.traffic == "mixed":
            bad = sorted(set(self.mix) - {"distinct", "review", "interactive"})
            if bad or not self.mix or any(not v >= 0 for v in self.mix.values()) or not sum(self.mix.values()) > 0:
                raise ValueError(
                    f"load.mix gives shares >= 0 (some > 0) to distinct, review, interactive, got {dict(self.mix)}"
                )
        if self.report_every_s is not None and not 0.1 <= self.report_every_s <= 1e6:  # KataGo's own bounds
            raise ValueError(f"load.report_every_s must be 0.1 .. 1e6 seconds or null, got {self.report_every_s!r}")
        if "analyzeTurns" in self.query_fields:
            raise ValueError("load.query_fields must not set analyzeTurns: load.traffic=review analyses every turn")

    @property
    def game_set(self) -> GameSet:
        """The games the traffic is built from (``games``, or by kind when null)."""
        return self.games or ("samples" if self.traffic == "distinct" else "selfplay")

    @property
    def counts_turns(self) -> bool:
        """Whether windows, warmup and the headline interval count analysed turns (else requests)."""
        return self.traffic != "distinct"

    @property
    def highest_level(self) -> int:
        """The most requests this load can have in flight (sizes connection pools and kgserve's limits)."""
        return max(self.max_concurrency, *self.concurrency) if self.ladder == "auto" else max(self.concurrency)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> LoadSettings:
        """Build from a config mapping (e.g. an OmegaConf ``load`` node); unknown keys raise ValueError."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown load setting(s) {unknown}; valid: {sorted(names)}")
        kwargs: dict[str, Any] = dict(values)
        if "concurrency" in kwargs:
            conc = kwargs["concurrency"]
            kwargs["concurrency"] = (int(conc),) if isinstance(conc, int) else tuple(int(c) for c in conc)
        if "query_fields" in kwargs:
            kwargs["query_fields"] = dict(kwargs["query_fields"] or {})
        if "mix" in kwargs:
            kwargs["mix"] = {str(k): float(v) for k, v in dict(kwargs["mix"] or {}).items()}
        return cls(**kwargs)

    def as_params(self) -> dict[str, str]:
        """Flat ``{key: str}`` for MLflow params (prefix them with ``load.``)."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                out[f.name] = ",".join(str(v) for v in value)
            elif isinstance(value, Mapping):
                out[f.name] = json.dumps(dict(value), sort_keys=True, separators=(",", ":"))
            else:
                out[f.name] = str(value)
        return out


@dataclass(frozen=True)
class HttpTarget:
    """A running kgserve: ``base_url`` like ``http://127.0.0.1:8123``; ``headers`` e.g. Authorization."""

    base_url: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DirectTarget:
    """A started ``kgserve.engine.pool.EnginePool`` (or anything with ``submit(query) -> async iterator of lines``)."""

    pool: Any


@dataclass(frozen=True)
class RequestRecord:
    """One request. Times in seconds since the start of the run, latency in ms."""

    level: int  # concurrency of the level (open loop: the in-flight cap)
    phase: Literal["warmup", "measure", "drain"]
    window: int  # measurement window index (-1 during warmup / drain)
    send_s: float  # intended send time (open loop) or actual send time (closed loop)
    latency_ms: float  # from send_s until the full response was read
    status: int  # HTTP status; direct transport: 200 ok, 400 rejected, 503 engine down; 0 = no response
    bytes: int  # response body bytes
    visits: int | None  # rootInfo.visits of the final analysis
    error: str | None  # one of ERROR_KINDS, None = success
    position: str  # traffic key of the position or game (see kgbench.load.traffic, kgbench.load.kinds)
    repeat: int = 0  # which repeat of the level (load.repeats)
    turns: int = 0  # analysed turns answered (a review: up to its game's; also of a request that failed later)
    kind: str = "distinct"  # the traffic kind of the worker that sent it (load.traffic; mixed: per worker)
    partials: int = 0  # partial lines received (reportDuringSearchEvery)


@dataclass(frozen=True)
class LevelSummary:
    """Measured figures of one level (warmup excluded)."""

    concurrency: int
    offered_rate: float | None  # open loop: the Poisson rate; closed loop: None
    requests: int
    duration_s: float
    req_per_s: float  # successful responses per second
    visits_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    error_rate: float  # errors / requests
    errors: int
    timeouts: int
    errors_by_kind: dict[str, int]
    windows: int
    window_req_per_s: tuple[float, ...]
    stable: bool
    # 95% interval of req/s: from the windows, or from the repeats when repeats > 1 (kgbench.load.interval)
    req_per_s_low: float = math.nan
    req_per_s_high: float = math.nan
    # goodput: successful responses per second that finished within slo_ms, with its interval
    slo_ms: float = math.nan
    goodput_per_s: float = math.nan
    goodput_low: float = math.nan
    goodput_high: float = math.nan
    repeats: int = 1
    # run-relative (start, end) seconds of each repeat's measurement windows: what the machine's samplers are read over
    measure_spans: tuple[tuple[float, float], ...] = ()
    # analysed turns (final lines) completed in the windows, whatever request they belong to (distinct: one a request)
    turns: int = 0
    turns_per_s: float = math.nan
    turns_per_s_low: float = math.nan
    turns_per_s_high: float = math.nan
    window_turns_per_s: tuple[float, ...] = ()
    # ms per analysed turn: each successful request's latency over its turns (a review of 200 turns in 40 s: 200 ms)
    turn_p50_ms: float = math.nan
    turn_p99_ms: float = math.nan
    # traffic=mixed: per kind, {req_per_s, turns_per_s, p50_ms, p99_ms, turn_p50_ms}
    by_kind: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def rate(self, turns: bool) -> tuple[float, float, float]:
        """(value, low, high): analysed turns/s when ``turns`` (the traffic counts turns), else req/s."""
        if turns:
            return self.turns_per_s, self.turns_per_s_low, self.turns_per_s_high
        return self.req_per_s, self.req_per_s_low, self.req_per_s_high


@dataclass(frozen=True)
class SelfWatch:
    """How the load generator itself fared during measurement."""

    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    cpu_share: float  # own process CPU seconds / wall seconds (1.0 = one full core)


@dataclass
class LoadResult:
    transport: Literal["http", "direct"]
    mode: Mode
    levels: list[LevelSummary]
    records: list[RequestRecord]
    position_repeat_rate: float  # share of sent queries whose position was sent before (in a sweep: by any job)
    unstable: bool  # some level hit max_windows without its last windows agreeing
    invalid: bool  # the load generator could not keep up (see invalid_reason); figures are not the server's
    invalid_reason: str | None
    selfwatch: SelfWatch | None = None
    stop_reason: str | None = None  # why the level ladder ended (ladder: auto) or was cut short (pruned)
    started_at: float = 0.0  # time.monotonic() the records' run-relative times count from
    traffic: str = "distinct"  # load.traffic
    turns_total: int = 0  # analysed turns answered over the whole run (warmup and drain included)
    visits_total: int = 0  # their final visits: what the engine's NN rows are divided by (NN rows per visit)

    def headline(self) -> LevelSummary | None:
        """The level with the highest req/s, or analysed turns/s when the traffic counts turns (None when no level
        ran)."""
        if self.traffic != "distinct":
            return max(self.levels, key=lambda lv: lv.turns_per_s if math.isfinite(lv.turns_per_s) else -1.0,
                       default=None)  # fmt: skip
        return max(self.levels, key=lambda lv: lv.req_per_s, default=None)

    def goodput_headline(self) -> LevelSummary | None:
        """The level with the highest goodput (None when no level ran)."""
        return max(self.levels, key=lambda lv: lv.goodput_per_s if math.isfinite(lv.goodput_per_s) else -1.0,
                   default=None)  # fmt: skip

    def records_frame(self) -> Any:
        """The per-request records as a pandas DataFrame (columns = RequestRecord fields)."""
        cols = [f.name for f in dataclasses.fields(RequestRecord)]
        return pd.DataFrame([dataclasses.astuple(r) for r in self.records], columns=cols)

    def write_csv(self, path: str) -> None:
        """Write the per-request records (``requests.csv`` artifact)."""
        self.records_frame().to_csv(path, index=False)


@dataclass(frozen=True)
class ProgressUpdate:
    """Sent to the progress callback about twice a second and at every window end."""

    level: int
    level_index: int
    levels: int
    phase: Literal["warmup", "measure", "drain", "done"]
    window: int
    req_per_s: float  # live, over the last window (or since the level started); in `unit`
    errors: int  # errors so far in this level
    unit: str = "req/s"  # turns/s when the traffic counts analysed turns (review, interactive, mixed)


Progress = Callable[[ProgressUpdate], None]

LevelHook = Callable[[LevelSummary], bool]
"""Called after every level with its summary; returning True stops the run there (e.g. an Optuna trial pruned)."""
