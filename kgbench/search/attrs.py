"""What kgbench keeps in the journal beside Optuna's own (user attributes), and what kind of trial each says.

A trial is one of: **measured** (its job ran and gave a value, or was pruned), **failed** (its job ran and failed:
told ``failed_value`` for the sampler, or FAIL; never a measurement), **lost** (its job died: FAIL, measured again,
kgbench.search.lease) or a **copy** that ran no job (told an earlier trial's result: reused; or copied from a study of
the same condition under another space: imported). Only measured trials give a value that is reused, copied or
reported as the best. A lost trial, or a failed one retried (``hydra.sweeper.retry_failed``), is void: the study no
longer counts it as having tried its config.
"""

from __future__ import annotations

from optuna.trial import FrozenTrial, TrialState

__all__ = ["FAILED_ATTR", "FAILURE_ATTR", "FAMILY_ATTR", "IMPORTED_ATTR", "JOB_S_ATTR", "LEASE_ATTR", "LOST_ATTR",
           "MACHINE_ATTR", "PRUNED_ATTR", "PRUNER_ATTR", "RETRIED_ATTR", "REUSED_ATTR", "SPACE_ATTR", "VALUES_ATTR",
           "is_copy", "is_failed", "is_lost", "is_measured"]  # fmt: skip

# study
PRUNER_ATTR = "kgbench.pruner"  # the pruner's settings, for the jobs
RETRIED_ATTR = "kgbench.retried"  # the failed trials whose configs hydra.sweeper.retry_failed enqueued again (a
# list of trial numbers: a finished trial's own attributes cannot be written)
FAMILY_ATTR = "kgbench.family"  # hydra.sweeper.study_name it was made under (kgbench.search.studies)
SPACE_ATTR = "kgbench.space"  # its space (SearchSpace.identity)
# trial
VALUES_ATTR = "kgbench.values"  # the values its job ran, by parameter (whatever the space's params are)
PRUNED_ATTR = "kgbench.pruned_at_step"  # set by the job when the pruner stopped it
REUSED_ATTR = "kgbench.reused_from"  # same params as this earlier trial, whose result it was told (no job)
IMPORTED_ATTR = "kgbench.imported_from"  # copied from "<study>#<trial>" of the same condition (no job)
FAILED_ATTR = "kgbench.failed"  # its job failed, told as the failed value
FAILURE_ATTR = "kgbench.failure"  # the job's own one-line reason, written by the job
JOB_S_ATTR = "kgbench.job_s"  # its job's wall seconds (set by the job; by the sweeper if the job could not)
MACHINE_ATTR = "kgbench.machine"  # the machine its job ran on (set by the job: under PBS, the node's)
LEASE_ATTR = "kgbench.lease"  # the sweeper holding it and until when (kgbench.search.lease)
LOST_ATTR = "kgbench.lost"  # why its job was taken for dead (told FAIL, measured again)


def is_copy(trial: FrozenTrial) -> bool:
    """A trial that ran no job: reused an earlier trial's result, or imported from a sibling study."""
    return REUSED_ATTR in trial.user_attrs or IMPORTED_ATTR in trial.user_attrs


def is_lost(trial: FrozenTrial) -> bool:
    return LOST_ATTR in trial.user_attrs


def is_failed(trial: FrozenTrial) -> bool:
    """Its own job failed (a copy or a lost trial is neither)."""
    if is_copy(trial) or is_lost(trial):
        return False
    return FAILED_ATTR in trial.user_attrs or trial.state == TrialState.FAIL


def is_measured(trial: FrozenTrial) -> bool:
    """A value a job measured (or a prune), a copy of one included: what may be reused, copied or the best."""
    if is_lost(trial) or FAILED_ATTR in trial.user_attrs:
        return False
    return trial.state == TrialState.PRUNED or (trial.state == TrialState.COMPLETE and trial.value is not None)
