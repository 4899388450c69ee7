"""The simulated engine's NN cache across searches: how much of a search's NN evaluations an earlier (or running)
search of the same position, of the position one move before or of the one move after left in KataGo's table.
This is what makes a game review cheaper than distinct positions (KataGo's analysis docs: queries on nearby moves of
one game share positions; its maintainer, KataGo issue #595: the next move's search is much faster from the cache).

KataGo's table (cpp/neuralnet/nneval.cpp, NNCacheTable) is direct-mapped: 2^nnCacheSizePowerOfTwo slots, each
evaluation stored at its hash's low bits over whatever was there (-1: no table). With random hashes an entry
survives k later writes with probability (1 - 1/C)^k ~ exp(-k / C), C slots. The model keeps no entries: it counts
the rows written to the table (every search's cache misses) and remembers recent searches by their position's key
and their parent position's key, with the count when they began and ended.

A new search at position P (its target V visits) finds shared evaluations in
  - a search of P itself (the same position again): SAME x min(1, its visits / V),
  - a search of P's parent (P's tree is part of it, under the move played): PARENT x min(1, its visits / V),
  - a search of a child of P (its tree is part of P's): CHILD x min(1, its visits / V),
each times the share of that search's entries still in the table when this one reads them (`_survival`: a finished
search's rows spread over its run, read about half this search's writes later; a running one's read at its lead)
and, for a search still running, what it has done plus CONCURRENT of the rest (of the evaluations both still need,
it makes that share first: KataGo's analysis threads take a review's turns in order, so each turn runs beside the
move before's, which began one thread's turn earlier). Several neighbours
combine as independent sources: 1 - prod(1 - share_i).

The shares are calibrated on the real CPU KataGo (the test network at 16 visits, docs/traffic.md and
docs/throughput-model.md, "The NN cache across searches"), and are used for every profile: how much two successive
positions' trees share is a property of the search, not of the device (not measured on a GPU).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kgserve.sim.model.profiles import DeviceProfile

__all__ = ["SHARES", "CacheShares", "NNCacheModel", "cache_speedup"]

_REMEMBERED = 65536  # recent searches kept (older ones' entries are long gone at any table size that matters)


@dataclass(frozen=True)
class CacheShares:
    """Fitted so that the sim's NN rows per visit (on the cpu-eigen-b6c96 profile, 4 analysis threads, 16 visits)
    are the real CPU KataGo's over its rows per visit without a table (1.067): one position a request after the move
    before 0.59 (real 0.633-0.640) and a review at the default table 0.689 (real 0.726-0.745) (docs/traffic.md,
    "The sim against the real engine"). The sim's own accounting (a search's rows at the load it runs beside) puts
    its rows per visit below 1 - hit at one search in flight, so the fitted shares are below the raw ratios
    (1 - 0.633 / 1.067 = 0.41)."""

    same: float = 0.85  # the same position searched again (KataGo: the tree's evaluations are all in the table)
    parent: float = 0.34  # fitted on one position a request (load=positions) on the real CPU KataGo
    child: float = 0.34  # not measured (no traffic here steps backwards): taken as the parent's
    concurrent: float = 0.56  # fitted on review at 2^23 on the real CPU KataGo, with `parent` fixed


SHARES = CacheShares()


@dataclass
class _Record:
    start: float  # rows written to the table when the search began
    end: float | None  # ... when it ended (None: still searching)
    visits: float
    progress: Callable[[], float] | None = None  # a running search's share of its visits done


class NNCacheModel:
    """One engine process's table, as a count of the rows written and the searches that wrote them."""

    def __init__(self, cache_pow: int, shares: CacheShares = SHARES) -> None:
        self.capacity = 0 if cache_pow < 0 else 1 << min(cache_pow, 62)
        self.shares = shares
        self.written = 0.0
        self.searches: OrderedDict[bytes, _Record] = OrderedDict()
        self.children: OrderedDict[bytes, bytes] = OrderedDict()  # parent position key -> its latest child's key

    def clear(self) -> None:
        """The `clear_cache` action: nothing searched before is in the table any more."""
        self.searches.clear()
        self.children.clear()

    def wrote(self, rows: float) -> None:
        self.written += rows

    def _survival(self, record: _Record, ahead: float) -> float:
        """The share of a neighbour's entries still in the table when this search reads them. A finished neighbour
        wrote its L rows spread over [start, end]; this search reads them about `ahead` rows from now: the mean of
        exp(-(now + ahead - w) / C) over its writes w, (C / L)(1 - exp(-L / C)) exp(-(now - end + ahead) / C). A
        running one is followed at its lead: what it writes is read about (now - start) rows later."""
        c = self.capacity
        if record.end is None:
            return math.exp(-max(0.0, self.written - record.start) / c)
        span = max(0.0, record.end - record.start)
        spread = 1.0 if span <= 0 else c / span * -math.expm1(-span / c)
        return spread * math.exp(-(max(0.0, self.written - record.end) + ahead) / c)

    def _share(self, key: bytes | None, share: float, visits: float, ahead: float) -> float:
        record = self.searches.get(key) if key is not None and share > 0 else None
        if record is None:
            return 0.0
        met = 1.0
        if record.end is None:  # what it has done is there; of the rest, CONCURRENT comes before this search needs it
            done = min(1.0, max(0.0, record.progress())) if record.progress is not None else 0.0
            met = done + (1.0 - done) * self.shares.concurrent
        return share * met * min(1.0, record.visits / max(visits, 1.0)) * self._survival(record, ahead)

    def start(self, key: bytes, parent: bytes | None, visits: float, running: int) -> float:
        """A search begins: the share of its evaluations the table answers (0 without a table); it is then
        remembered as running."""
        hit = 0.0
        if self.capacity:
            ahead = 0.5 * visits * max(1, running)
            found = (
                self._share(key, self.shares.same, visits, ahead),
                self._share(parent, self.shares.parent, visits, ahead),
                self._share(self.children.get(key), self.shares.child, visits, ahead),
            )
            hit = 1.0 - math.prod(1.0 - f for f in found)
        self.searches.pop(key, None)
        self.searches[key] = _Record(self.written, None, visits)
        if parent is not None:
            self.children.pop(parent, None)
            self.children[parent] = key
        for table in (self.searches, self.children):
            while len(table) > _REMEMBERED:
                table.popitem(last=False)
        return min(hit, 0.95)

    def follow(self, key: bytes, progress: Callable[[], float]) -> None:
        """The running search at ``key`` reports its progress (share of its visits done) through ``progress``."""
        record = self.searches.get(key)
        if record is not None and record.end is None:
            record.progress = progress

    def finish(self, key: bytes, visits: float) -> None:
        """The search at ``key`` ended after ``visits`` visits."""
        record = self.searches.get(key)
        if record is not None and record.end is None:
            record.end = self.written
            record.visits = visits
            record.progress = None


def cache_speedup(dev: DeviceProfile, hit: float) -> float:
    """How much faster a search runs when a share ``hit`` of its evaluations come from the table: a GPU profile is
    bound by its evaluations (1 / (1 - hit)); on a cpu profile a visit still costs its tree work, only the NN's
    share of its CPU time goes (per row n1 + n0 / b at the batch its NN threads find, b = batch_cap)."""
    hit = min(max(hit, 0.0), 0.95)
    if dev.kind != "cpu":
        return 1.0 / (1.0 - hit)
    nn = dev.n1 + dev.n0 / max(1.0, dev.batch_cap or 1.0)
    share = nn / (nn + dev.c_visit)
    return 1.0 / (1.0 - hit * share)
