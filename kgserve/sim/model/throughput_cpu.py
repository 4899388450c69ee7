"""Steady state of a cpu profile: KataGo's Eigen backend, where the neural net runs on the search's own cores.

For `active` searches of T search threads each (n = active x T threads in flight):

* NN threads: numEigenThreadsPerModel, else KataGo's default min(n, cores) (numNNServerThreadsPerModel is
  ignored by the Eigen backend); each evaluates batches of b = min(nnMaxBatchSize, batch_cap, threads waiting /
  NN threads) rows, the threads waiting being the share of n whose time goes to NN evaluation (fixed point); with
  every core busy only a few search threads run between two batches of an NN thread, hence batch_cap (the real
  engine's average batch never passed 2.0 on 2 cores, whatever nnMaxBatchSize and the threads in flight);
* CPU seconds per visit: tree work c_visit + NN rows x (n1 + n0 / b) (a per-batch cost amortised over the batch),
  x (1 + oversub x log2(threads / cores)) when threads outnumber the cores, plus the per-query cost q0 spread over
  the query's visits; T > 1 wastes evaluations: (1 + waste x (T - 1)) computed visits per useful one;
* visits per second = min(usable cores / CPU per visit, NN threads / NN CPU per visit), usable cores =
  min(cores, n): one search thread and its NN evaluation alternate, so a lone search thread keeps one core busy;
* NN cache: a share `search_hit` of a search's rows hit as in the GPU model (10%: transpositions).

`device_util` is the share of the host's cores this process keeps busy: the simulated "device" of a cpu profile
is the host, so several sim processes on one KGSERVE_SIM_DEVICE share its cores.
"""

from __future__ import annotations

import math

from kgserve.sim.model.profiles import DeviceProfile
from kgserve.sim.model.steady import Steady

__all__ = ["cpu_steady_state", "nn_threads"]


def nn_threads(dev: DeviceProfile, threads_in_flight: int, eigen_threads: int) -> int:
    """KataGo's Eigen backend: numEigenThreadsPerModel if set, else min(search threads in flight, cores)."""
    return eigen_threads if eigen_threads > 0 else max(1, min(threads_in_flight, dev.host_cores))


def cpu_steady_state(
    dev: DeviceProfile,
    *,
    active: int,
    search_threads: int,
    max_batch: int,
    eigen_threads: int,
    cache_entries: int,
    visits_hint: int,
) -> Steady:
    if active <= 0:
        return Steady(0.0, 0.0, 0.0, 0.0)
    n = active * search_threads
    s = nn_threads(dev, n, eigen_threads)
    oversub = 1.0 + dev.oversub * max(0.0, math.log2((n + s) / dev.host_cores))
    working_set = active * min(max(visits_hint, 1), 20000) * 3
    miss = 1.0 - dev.search_hit * min(1.0, cache_entries / max(1, working_set))
    per_query = dev.q0 / max(visits_hint, 1)
    b = 1.0
    nn_cpu = tree_cpu = 0.0
    for _ in range(50):
        nn_cpu = miss * (dev.n1 + dev.n0 / b) * oversub
        tree_cpu = dev.c_visit * oversub + per_query
        waiting = n * nn_cpu / (nn_cpu + tree_cpu)
        new_b = min(float(max_batch), dev.batch_cap or float(max_batch), max(1.0, waiting / s))
        if abs(new_b - b) < 1e-4:
            b = new_b
            break
        b = 0.5 * (b + new_b)
    per_visit = nn_cpu + tree_cpu
    usable = min(dev.host_cores, n)
    visits = min(usable / per_visit, s / nn_cpu)
    useful = visits / (1.0 + dev.waste * (search_threads - 1))
    util = min(1.0, visits * per_visit / dev.host_cores)
    return Steady(visits * miss, useful / active, b, util)
