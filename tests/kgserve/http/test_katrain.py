"""KaTrain's own remote engine (katrain.core.remote_engine.RemoteKataGoEngine, PyPI `katrain` 1.20) against a
real kgserve on the simulated engine: analysis, pondering and its terminate, an illegal move, two clients.

KaTrain is a large optional package (`pip install '.[katrain]'`): without it these tests skip, saying so.
Kivy imports without a display with KIVY_NO_ARGS=1; its logs and home go to a temporary folder.
"""

from __future__ import annotations

import os
import queue
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.katrain_traffic import katrain_config

os.environ.setdefault("KIVY_NO_ARGS", "1")
os.environ.setdefault("KIVY_NO_CONSOLELOG", "1")
os.environ.setdefault("KIVY_NO_FILELOG", "1")
os.environ.setdefault("KIVY_HOME", str(Path(tempfile.gettempdir()) / "kgbench-test-kivy-home"))
remote_engine = pytest.importorskip(
    "katrain.core.remote_engine", reason="katrain is not installed (pip install '.[katrain]')"
)
game_node = pytest.importorskip("katrain.core.game_node")
constants = pytest.importorskip("katrain.core.constants")
pysgf = pytest.importorskip("pysgf")

TOKEN = "katrain-test-token-5e2"
WAIT_S = 60.0
pytestmark = [pytest.mark.slow, pytest.mark.katrain]


class FakeKaTrain:
    """What RemoteKataGoEngine asks of KaTrain's app object: log, status bar, popups (recorded, never shown)."""

    def __init__(self) -> None:
        self.logs: list[tuple[str, int]] = []
        self.statuses: list[str] = []
        self.popups: list[tuple[Any, ...]] = []
        self.controls = self

    def log(self, message: Any, level: int = 0) -> None:
        self.logs.append((str(message), level))

    def set_status(self, message: str, level: int = 0, **_: Any) -> None:
        self.statuses.append(message)

    def __call__(self, *args: Any) -> None:
        self.popups.append(args)


class Results:
    """A query's callbacks, collected from KaTrain's reader thread."""

    def __init__(self) -> None:
        self.items: queue.Queue[tuple[str, dict[str, Any], bool]] = queue.Queue()

    def callback(self, analysis: dict[str, Any], partial: bool) -> None:
        self.items.put(("result", analysis, partial))

    def error(self, analysis: dict[str, Any]) -> None:
        self.items.put(("error", analysis, False))

    def next(self) -> tuple[str, dict[str, Any], bool]:
        return self.items.get(timeout=WAIT_S)

    def final(self) -> dict[str, Any]:
        while True:
            kind, analysis, partial = self.next()
            assert kind == "result", analysis
            if not partial:
                return analysis


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    config = config_writer(
        tmp_path_factory.mktemp("kgserve"),
        server={"auth_token_env": "KGSERVE_KATRAIN_TEST_TOKEN"},
        limits={"max_visits": 100_000},
    )
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "1", "KGSERVE_KATRAIN_TEST_TOKEN": TOKEN})
    process.wait_listening()
    process.wait_ready()
    yield process
    process.stop()


@pytest.fixture
def engines(server: Any) -> Iterator[list[Any]]:
    made: list[Any] = []
    yield made
    for engine in made:
        engine.shutdown(finish=False)


def katrain_engine(server: Any, engines: list[Any]) -> tuple[Any, FakeKaTrain]:
    app = FakeKaTrain()
    config = katrain_config(server.url.replace("http://", "ws://") + f"/ws?token={TOKEN}")
    engine = remote_engine.RemoteKataGoEngine(app, config)
    engines.append(engine)
    assert engine.check_alive(), app.logs
    return engine, app


def position(*gtp_moves: str, size: int = 19) -> Any:
    node = game_node.GameNode(properties={"SZ": size, "KM": 6.5, "RU": "japanese"})
    for index, gtp in enumerate(gtp_moves):
        player = "B" if index % 2 == 0 else "W"
        node = game_node.GameNode(parent=node, move=pysgf.Move.from_gtp(gtp, player=player))
    return node


def test_analysis_reaches_katrains_callback(server: Any, engines: list[Any]) -> None:
    engine, app = katrain_engine(server, engines)
    results = Results()
    engine.request_analysis(position("Q16", "D4"), results.callback, results.error, time_limit=False)
    analysis = results.final()
    assert analysis["id"] == "QUERY:1" and analysis["turnNumber"] == 2
    assert analysis["rootInfo"]["visits"] == 40 and analysis["moveInfos"]
    assert not app.popups


def test_pondering_partials_then_katrains_terminate_stops_it(server: Any, engines: list[Any]) -> None:
    engine, app = katrain_engine(server, engines)
    results = Results()
    engine.request_analysis(position("Q16"), results.callback, results.error, ponder=True, time_limit=False)
    partials: list[int] = []
    while len(partials) < 3:
        kind, analysis, partial = results.next()
        assert kind == "result" and partial, analysis
        partials.append(analysis["rootInfo"]["visits"])
    assert partials == sorted(partials)
    # kgserve clamped KaTrain's 10,000,000 visits and said so: KaTrain shows it in its status bar
    assert any("100000" in status and "maxVisits" in status for status in app.statuses), app.statuses
    engine.stop_pondering()  # KaTrain sends {"action": "terminate", "terminateId": ...}
    stopped = results.final()
    assert partials[-1] <= stopped["rootInfo"]["visits"] < 100_000  # cut short, not run to the cap
    assert any("terminateId" in message for message, _ in app.logs)  # kgserve acknowledged the terminate
    assert not [message for message, level in app.logs if level == constants.OUTPUT_ERROR]


def test_illegal_move_reaches_the_error_callback(server: Any, engines: list[Any]) -> None:
    engine, _ = katrain_engine(server, engines)
    results = Results()
    engine.request_analysis(position("Q16", "Q16"), results.callback, results.error, time_limit=False)
    kind, analysis, _ = results.next()
    assert kind == "error" and "Illegal move" in analysis["error"] and analysis["id"] == "QUERY:1"


def test_two_clients_with_the_same_ids_get_their_own_results(server: Any, engines: list[Any]) -> None:
    (first, _), (second, _) = katrain_engine(server, engines), katrain_engine(server, engines)
    mine, theirs = Results(), Results()
    first.request_analysis(position("C3", size=9), mine.callback, mine.error, time_limit=False)
    second.request_analysis(position("Q16", "D4", "Q4"), theirs.callback, theirs.error, time_limit=False)
    got_mine, got_theirs = mine.final(), theirs.final()
    assert got_mine["id"] == got_theirs["id"] == "QUERY:1"
    assert got_mine["turnNumber"] == 1 and got_theirs["turnNumber"] == 3
    assert all(len(info["move"]) <= 2 for info in got_mine["moveInfos"])  # 9x9 moves only (A1..J9, or pass)
    assert mine.items.empty() and theirs.items.empty()
