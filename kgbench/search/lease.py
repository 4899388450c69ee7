"""Leases on running trials: a trial whose job died is found and measured again.

Optuna's heartbeat (``heartbeat_interval``, ``fail_stale_trials``) exists for its RDB storage only; the journal
storage (Optuna 5.0) has none, so the search keeps leases of its own, in the journal, which works across nodes
wherever the journal does:

- A sweeper holds a lease on every trial it asked and has not told yet: the trial's user attribute
  ``kgbench.lease`` (its host, pid and process start, and ``until``: now + ``lease_s``), renewed every quarter of
  ``lease_s`` by a thread (``LeaseKeeper``).
- A running trial is **lost** (``lost_reason``) when its sweeper is gone: on the same host its process no longer
  exists (at once: a killed sweeper, a ``kill -9``); on another host its lease ran out (the node, or the sweeper,
  stopped renewing it: walltime, preemption, a lost node; node clocks agree to within seconds under NTP, far less
  than a lease); a running trial with no lease at all (asked by a kgbench from before leases, or by a sweeper killed
  between asking and leasing) once it started more than ``lease_s`` ago. A job that ended without writing its end
  (``kgbench.job_s``) while its sweeper lived is lost too (kgbench.search.optuna_sweeper).
- A lost trial is told FAIL with the reason (``kgbench.lost``): the sampler ignores it, it costs none of
  ``n_trials``, and its config is enqueued to be measured again (kgbench.search.study.requeue_lost); a config lost
  twice is not run a third time (it may be what kills its node).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from types import TracebackType

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from kgbench.owner import Owner
from kgbench.search.attrs import LEASE_ATTR, LOST_ATTR

__all__ = ["LeaseKeeper", "Owner", "lease_value", "lost_reason", "reap_lost"]

log = logging.getLogger(__name__)


def lease_value(owner: Owner, lease_s: float, now: float | None = None) -> dict[str, object]:
    now = time.time() if now is None else now
    return {"host": owner.host, "pid": owner.pid, "started": owner.started, "until": round(now + lease_s, 3)}


def lost_reason(trial: FrozenTrial, lease_s: float, now: float | None = None) -> str | None:
    """Why a running trial's job is taken for dead, or None while its sweeper may still be at it."""
    now = time.time() if now is None else now
    lease = trial.user_attrs.get(LEASE_ATTR)
    if not isinstance(lease, Mapping):
        started = trial.datetime_start.timestamp() if trial.datetime_start else None
        if started is not None and now - started > lease_s:
            return (f"running with no lease for {now - started:.0f} s (> {lease_s:g}): asked by a sweeper that kept "
                    "none (a kgbench from before leases) or killed before it took one")  # fmt: skip
        return None
    owner = Owner.of(lease)
    if owner is not None and (gone := owner.gone()) is not None:
        return f"its sweeper ({owner.describe()}) is gone" if gone else None
    until = float(str(lease.get("until", 0)))
    if now > until:
        who = owner.describe() if owner else "unknown"
        return (f"its sweeper ({who}) stopped renewing its lease {now - until + lease_s:.0f} s ago (the node, or "
                "the sweeper, is gone: walltime, preemption, a lost node)")  # fmt: skip
    return None


def reap_lost(study: optuna.Study, lease_s: float) -> list[tuple[int, str]]:
    """Tell every running trial whose job is taken for dead FAIL, with the reason (``kgbench.lost``); the
    (number, reason) of each. Call it holding the ask lock (kgbench.search.journal.ask_lock)."""
    reaped = []
    storage = study._storage
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if (why := lost_reason(trial, lease_s)) is None:
            continue
        try:
            storage.set_trial_user_attr(trial._trial_id, LOST_ATTR, why)
            storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
        except (RuntimeError, ValueError):  # told meanwhile by its own sweeper (UpdateFinishedTrialError)
            continue
        reaped.append((trial.number, why))
    return reaped


class LeaseKeeper:
    """Holds this sweeper's leases: ``hold`` a trial when it is asked, ``release`` it when told; a thread renews the
    held leases every quarter of ``lease_s``."""

    def __init__(self, storage: BaseStorage, lease_s: float, owner: Owner | None = None) -> None:
        self.storage = storage
        self.lease_s = lease_s
        self.owner = owner or Owner.me()
        self._held: set[int] = set()  # trial ids
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_until_stopped, name="kgbench-lease", daemon=True)
        self._warned = False

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def hold(self, trial_id: int) -> None:
        self.storage.set_trial_user_attr(trial_id, LEASE_ATTR, lease_value(self.owner, self.lease_s))
        with self._lock:
            self._held.add(trial_id)

    def release(self, trial_id: int) -> None:
        with self._lock:
            self._held.discard(trial_id)

    def held(self) -> set[int]:
        with self._lock:
            return set(self._held)

    def renew(self) -> None:
        for trial_id in self.held():
            try:
                self.storage.set_trial_user_attr(trial_id, LEASE_ATTR, lease_value(self.owner, self.lease_s))
            except (RuntimeError, ValueError):  # finished (told, or taken for lost by another worker): let it go
                self.release(trial_id)
            except Exception as exc:  # the journal unreachable for a while: the next renewal may get through
                if not self._warned:
                    log.warning("cannot renew the leases of running trials: %s: %s", type(exc).__name__, exc)
                    self._warned = True

    def _renew_until_stopped(self) -> None:
        while not self._stop.wait(self.lease_s / 4):
            self.renew()
