"""kgserve's hot path against the bare stack it is built on (issue 14), one client, alternating rounds.

``python -m benchmarks.hotpath [--rounds 3] [--seconds 4] [--quick] [--defences]`` prints a Markdown table.

``--defences`` (issue 40) compares instead a lone client's hot path through kgserve (on the stand-in engine) with
every shipped defence on (runtime/config.yaml's limits: per-client caps, pacing, memory shares, the thread
reserve) against the same kgserve with them all off (benchmarks.rig.servers.defences_off) and against the bare
stack, the three alternating round by round; goals: on / off >= 0.9, on / bare >= 0.9.

Three servers run side by side on loopback: the bare stack (benchmarks.rig.bare_asgi: Starlette on uvicorn,
one route answering one ndjson line of the size of kgserve's answer), kgserve with one sim engine at zero
cost (``KGSERVE_SIM_FIXED_RPS=0``), and kgserve on benchmarks.rig.standin_engine (canned real KataGo answers,
no search: on a machine with few cores the sim's own ~600 µs of CPU per query competes with kgserve; the
stand-in's does not). The same aiohttp closed-loop client (benchmarks.rig.client) loads each in turn,
the order rotating every round, so slow drifts of a shared machine hit all alike; the table gives medians
over the rounds and the median of the per-round ratios to the bare stack. Workloads: single queries with
~1 KB and ~12 KB answers at 64 and 256 in flight, a request of 256 query lines, a whole-game
``analyzeTurns`` request, and the bulk policy profile
(``maxVisits 1``, policy and ownership: conf/load/policy.yaml).

CPU per query is the server process's own CPU time (``/proc/<pid>/stat`` via psutil; the engine, a child
process, sim or stand-in, is not counted) over a round's measured window (no warm-up) divided by the queries
answered in it. The client's headroom is its ceiling: the req/s it would reach with one core to itself
(requests / its CPU seconds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from benchmarks.common import run_on_sim
from benchmarks.rig.client import RoundResult, closed_loop
from benchmarks.rig.servers import ServerProcess, bare_server, defences_off, kgserve_server, standin_settings
from kgbench.load.traffic import QuerySource, build_query
from kgbench.targets.sim import sim_env, sim_settings
from kgbench.track.machine import machine_line

__all__ = ["LARGE", "POLICY", "SMALL", "Workload", "main", "single_bodies", "workloads"]


@dataclass(frozen=True)
class Workload:
    name: str
    concurrency: tuple[int, ...]
    make_bodies: Callable[[], list[bytes]]
    queries_per_request: Callable[[bytes], int] = lambda body: 1


def _positions(extra: dict[str, Any], count: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    source = QuerySource.from_dirs(seed=seed)
    for index in range(count):
        _, body = source.next()
        body = {k: v for k, v in body.items() if not k.startswith("include")}
        body.update(extra)
        body["id"] = f"q{index}"
        yield body


def single_bodies(extra: dict[str, Any], count: int = 2000) -> list[bytes]:
    """``count`` single-query bodies on distinct positions, ``extra`` fields set (e.g. SMALL)."""
    return [_encode(body) for body in _positions(extra, count)]


def _single(extra: dict[str, Any], count: int = 2000) -> Callable[[], list[bytes]]:
    return lambda: single_bodies(extra, count)


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def _batch(extra: dict[str, Any], lines: int, count: int = 16) -> Callable[[], list[bytes]]:
    def make() -> list[bytes]:
        queries = [_encode(body) for body in _positions(extra, lines * count)]
        return [b"\n".join(queries[i * lines : (i + 1) * lines]) for i in range(count)]

    return make


def _whole_game(visits: int) -> Callable[[], list[bytes]]:
    def make() -> list[bytes]:
        source = QuerySource.from_dirs(seed=0)
        game = max(source.games, key=lambda g: len(g.moves))
        bodies = []
        for symmetry in range(8):
            body = build_query(game, len(game.moves), symmetry, game.komi)
            body.update(id=f"game{symmetry}", maxVisits=visits, analyzeTurns=list(range(len(game.moves) + 1)))
            bodies.append(_encode(body))
        return bodies

    return make


def _lines(body: bytes) -> int:
    return body.count(b"\n") + 1


def _turns(body: bytes) -> int:
    return len(json.loads(body)["analyzeTurns"])


SMALL = {"maxVisits": 3}  # ~1 KB answers from the sim
LARGE = {"maxVisits": 60, "includeOwnership": True, "includePolicy": True}  # ~12 KB
POLICY = {"maxVisits": 1, "includeOwnership": True, "includePolicy": True}  # conf/load/policy.yaml


def workloads(quick: bool = False) -> list[Workload]:
    return [
        Workload("1 query, ~1 KB answer", (64, 256), _single(SMALL)),
        Workload("1 query, ~12 KB answer", (64, 256), _single(LARGE)),
        Workload("policy: maxVisits 1, policy + ownership", (256,), _single(POLICY)),
        Workload("256 query lines, ~1 KB answers", (4,), _batch(SMALL, 256), _lines),
        Workload("whole game analyzeTurns, maxVisits 3", (4,), _whole_game(3), _turns),
    ][: 2 if quick else None]


@dataclass
class Cell:
    """Rounds of one workload at one concurrency against one server."""

    rounds: list[RoundResult] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)

    def median(self, value: Callable[[RoundResult], float]) -> float:
        return statistics.median(value(r) for r in self.rounds)

    def cpu_us_per_query(self, per_request: int) -> float:
        return statistics.median(
            cpu / max(1, r.ok * per_request) * 1e6 for cpu, r in zip(self.cpu_s, self.rounds, strict=True)
        )


async def _round(
    server: ServerProcess, bodies: list[bytes], concurrency: int, seconds: float
) -> tuple[RoundResult, float]:
    result = await closed_loop(server.url + "/analysis", bodies, concurrency, seconds, server_cpu=server.cpu_s)
    return result, result.server_cpu_s


async def measure(work: Workload, rounds: int, seconds: float) -> list[str]:
    bodies = work.make_bodies()
    per_request = work.queries_per_request(bodies[0])
    rows = []
    with ExitStack() as stack:
        kgserve = stack.enter_context(kgserve_server(sim_settings(1), sim_env(0, device="hotpath")))
        standin = stack.enter_context(kgserve_server(standin_settings(sim_settings(1)), sim_env(0, device="standin")))
        size = await standin.answer_bytes(bodies[0])
        sizes = (await kgserve.answer_bytes(bodies[0]), size)
        bare = stack.enter_context(bare_server(size))
        servers = [("bare", bare), ("kgserve", kgserve), ("standin", standin)]
        for concurrency in work.concurrency:
            cells = {name: Cell() for name, _ in servers}
            ratios: dict[str, list[float]] = {"kgserve": [], "standin": []}
            for index in range(rounds):
                rates = {}
                # rotate the order every round, so slow drifts of a shared machine hit all three alike
                for name, server in servers[index % 3 :] + servers[: index % 3]:
                    result, cpu = await _round(server, bodies, concurrency, seconds)
                    cells[name].rounds.append(result)
                    cells[name].cpu_s.append(cpu)
                    rates[name] = result.req_per_s
                for name, values in ratios.items():
                    values.append(rates[name] / rates["bare"] if rates["bare"] else float("nan"))
            medians = {name: statistics.median(values) for name, values in ratios.items()}
            rows.append(_row(work, concurrency, sizes, per_request, cells, medians))
    return rows


def _row(
    work: Workload,
    concurrency: int,
    sizes: tuple[int, int],
    per_request: int,
    cells: dict[str, Cell],
    ratios: dict[str, float],
) -> str:
    bare, kg, stand = cells["bare"], cells["kgserve"], cells["standin"]
    errors = sum(r.errors for cell in cells.values() for r in cell.rounds)
    rate = lambda r: r.req_per_s  # noqa: E731
    return (
        f"| {work.name} | {concurrency} | {sizes[0]:,} / {sizes[1]:,} | {bare.median(rate):,.0f} "
        f"| {kg.median(rate):,.0f} | {stand.median(rate):,.0f} "
        f"| {ratios['kgserve']:.2f} | **{ratios['standin']:.2f}** "
        f"| {bare.median(lambda r: r.p50_ms):.1f} / {bare.median(lambda r: r.p99_ms):.1f} "
        f"| {kg.median(lambda r: r.p50_ms):.1f} / {kg.median(lambda r: r.p99_ms):.1f} "
        f"| {stand.median(lambda r: r.p50_ms):.1f} / {stand.median(lambda r: r.p99_ms):.1f} "
        f"| {bare.cpu_us_per_query(per_request):,.0f} | {kg.cpu_us_per_query(per_request):,.0f} "
        f"| {stand.cpu_us_per_query(per_request):,.0f} "
        f"| {min(c.median(lambda r: r.client_ceiling) for c in cells.values()):,.0f} | {errors} |"
    )


async def measure_defences(work: Workload, rounds: int, seconds: float) -> list[str]:
    """A lone client against kgserve (stand-in engine) with the shipped defences on, the same with them off, and the
    bare stack, alternating; medians of req/s and of the per-round ratios."""
    bodies = work.make_bodies()
    rows = []
    with ExitStack() as stack:
        shipped = standin_settings(sim_settings(1))
        on = stack.enter_context(kgserve_server(shipped, sim_env(0, device="on"), limits_as_given=True))
        off = stack.enter_context(kgserve_server(defences_off(shipped), sim_env(0, device="off"), limits_as_given=True))
        bare = stack.enter_context(bare_server(await on.answer_bytes(bodies[0])))
        servers = [("on", on), ("off", off), ("bare", bare)]
        for concurrency in work.concurrency:
            rates: dict[str, list[float]] = {name: [] for name, _ in servers}
            errors = 0
            for index in range(rounds):
                for name, server in servers[index % 3 :] + servers[: index % 3]:
                    result, _ = await _round(server, bodies, concurrency, seconds)
                    rates[name].append(result.req_per_s)
                    errors += result.errors
            rows.append(_defences_row(work, concurrency, rates, errors))
    return rows


def _ratio(rates: dict[str, list[float]], a: str, b: str) -> float:
    """The median over the rounds of a's req/s over b's in the same round."""
    return statistics.median(x / y if y else float("nan") for x, y in zip(rates[a], rates[b], strict=True))


def _defences_row(work: Workload, concurrency: int, rates: dict[str, list[float]], errors: int) -> str:
    med = {name: statistics.median(values) for name, values in rates.items()}
    each = {name: " / ".join(f"{r:,.0f}" for r in values) for name, values in rates.items()}
    return (
        f"| {work.name} | {concurrency} | {med['on']:,.0f} | {med['off']:,.0f} | {med['bare']:,.0f} "
        f"| **{_ratio(rates, 'on', 'off'):.2f}** | **{_ratio(rates, 'on', 'bare'):.2f}** "
        f"| {_ratio(rates, 'off', 'bare'):.2f} | {each['on']} | {each['off']} | {errors} |"
    )


DEFENCES_HEADER = (
    "| workload | in flight | defences on req/s | defences off req/s | bare req/s | **on / off** | **on / bare** "
    "| off / bare | on, each round | off, each round | errors |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


HEADER = (
    "| workload | in flight | answer bytes (sim / stand-in) | bare req/s | kgserve+sim req/s "
    "| kgserve+stand-in req/s | sim / bare | **stand-in / bare** | bare p50 / p99 ms | kgserve+sim p50 / p99 ms "
    "| kgserve+stand-in p50 / p99 ms | bare CPU µs / query | kgserve+sim CPU µs / query "
    "| kgserve+stand-in CPU µs / query | client ceiling req/s | errors |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


async def suite(args: argparse.Namespace) -> str:
    started = time.monotonic()
    rows = []
    for work in workloads(args.quick or args.defences):
        rows.extend(await (measure_defences if args.defences else measure)(work, args.rounds, args.seconds))
        print(rows[-1], file=sys.stderr, flush=True)
    title, header = ("a lone client, defences on vs off", DEFENCES_HEADER) if args.defences else ("", HEADER)
    return (
        f"### kgserve hot path vs the bare ASGI stack{': ' + title if title else ''}\n\n{machine_line()}; "
        f"{args.rounds} alternating rounds of {args.seconds:g} s per cell, medians\n\n{header}\n"
        + "\n".join(rows)
        + f"\n\nSuite wall time: {time.monotonic() - started:.0f} s.\n"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.hotpath", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per cell")
    p.add_argument("--seconds", type=float, default=4.0, help="measured seconds per round (after 0.5 s warm-up)")
    p.add_argument("--quick", action="store_true", help="the two single-query workloads only")
    p.add_argument(
        "--defences", action="store_true", help="kgserve with the shipped defences on vs off, and bare (issue 40)"
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    print(run_on_sim(suite(parse_args(argv))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
