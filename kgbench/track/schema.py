"""The MLflow schema of kgbench's runs, in one place: the store a sweep records into (`tracking_uri`), and every tag
name that one
part of kgbench writes and another reads (the sweep and track write them; decide, report and the summary read
them). docs/kgbench.md describes the runs these make.

A sweep is one parent run (ROLE=ROLE_SWEEP, SWEEP_ID) and one child run per job (ROLE=ROLE_JOB, PARENT_RUN).
"""

from __future__ import annotations

import os

from kgserve.paths import PROJECT_ROOT

__all__ = [
    "BACKEND",
    "BOTTLENECK",
    "BOTTLENECK_FIGURES",
    "BOTTLENECK_KNOB",
    "BUILD_GROUP",
    "COLD_START",
    "CONTENDED",
    "CONTENTION",
    "CONTENTION_ATTEMPTS",
    "ENGINE_BINARY",
    "ENGINE_MODEL",
    "FAILURE_REASON",
    "FAULTS",
    "GIT_COMMIT",
    "GPU_METRICS_ABSENT",
    "GPU_NAME",
    "HOST",
    "HYDRA_OVERRIDES",
    "INVALID",
    "INVALID_REASON",
    "JOB_KEY",
    "JOB_OVERRIDES",
    "KATAGO_VERSION",
    "LADDER_STOP",
    "LOAD_GROUP",
    "LOAD_SMOKE",
    "MFU_ABSENT",
    "MODE",
    "MODEL_FILE",
    "MODEL_SHA256",
    "NET_ARCH",
    "NET_GFLOPS_PER_EVAL",
    "NET_NAME",
    "NET_PARAMS",
    "OWNER_HOST",
    "OWNER_PID",
    "OWNER_STARTED",
    "PARENT_RUN",
    "POSITIONS",
    "POSITIONS_LEDGER",
    "PROMOTED",
    "PROMOTED_RUN",
    "PROMOTED_SCRATCH",
    "PROMOTED_SCRATCH_VALUE",
    "PRUNED",
    "RACE",
    "RACE_OF",
    "RACE_ROUND",
    "RECOMMENDED_SOURCE",
    "RECOMMENDED_THREADS",
    "ROLE",
    "ROLE_JOB",
    "ROLE_SWEEP",
    "RUNTIME_CONFIG",
    "SERVING",
    "SERVING_CHANGES",
    "SIMULATED",
    "SKIPPED_JOBS",
    "STATUS",
    "SWEEP_ID",
    "SYNTHETIC_NET",
    "TRT_CACHE",
    "UNSTABLE",
    "VERIFY",
    "WARNINGS",
    "flag",
    "tracking_uri",
]


def tracking_uri() -> str:
    """MLFLOW_TRACKING_URI when set, else the repository's sqlite store (what `mlflow ui` in the root reads);
    artifacts go beside it, in mlruns/."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{PROJECT_ROOT / 'mlflow.db'}"


def flag(value: bool) -> str:
    """A boolean tag's value."""
    return "true" if value else "false"


# the sweep's structure
ROLE = "kgbench.role"
ROLE_SWEEP = "sweep"
ROLE_JOB = "job"
SWEEP_ID = "kgbench.sweep_id"
PARENT_RUN = "mlflow.parentRunId"  # MLflow's own: a job's parent (sweep) run
JOB_KEY = "kgbench.job_key"  # a remote launcher's key for the job (kgbench.sweep.pbs.lost_jobs)
SKIPPED_JOBS = "kgbench.skipped_jobs"  # on a sweep: the jobs its preflight left out, each with why

# where a job ran: the runtime its figures belong to (kgbench.track.runtime_id), which promote never crosses
RUNTIME_CONFIG = "kgbench.runtime_config"  # the runtime config the job was composed from (absolute path)
ENGINE_BINARY = "kgbench.engine_binary"  # engine.binary= on the command line: the KataGo it ran instead
ENGINE_MODEL = "kgbench.engine_model"  # engine.model= on the command line: the model file it ran instead
HOST = "host"
GPU_NAME = "gpu_name"  # "none" without a GPU
JOB_OVERRIDES = "kgbench.job_overrides"  # the job's Hydra overrides as launched (JSON list): what a race re-runs
RACE_OF = "kgbench.race_of"  # a race's replicate: the run id of the sweep job it re-measures
RACE_ROUND = "kgbench.race_round"  # its round (1, 2, ...)

# what a job ran
HYDRA_OVERRIDES = "hydra_overrides"  # the job's overrides, as its run is named
GIT_COMMIT = "git_commit"  # the checkout's commit (-dirty when it had changes)
BACKEND = "backend"
MODE = "mode"
LOAD_GROUP = "kgbench.load"  # the load group's option (conf/load/): smoke, cpu, default, policy
LOAD_SMOKE = "smoke"  # load=smoke: a quick check of the pipeline; its verdicts say so
SIMULATED = "simulated"  # "true": figures of the simulated engine (kgserve.engine.client.is_simulated)
KATAGO_VERSION = "katago_version"
MODEL_FILE = "model_file"
MODEL_SHA256 = "model_sha256"
COLD_START = "kgbench.cold_start"  # "true": its own kgserve and engines, no cache carried over
BUILD_GROUP = "kgbench.build_group"  # jobs that share one TensorRT engine build
TRT_CACHE = "kgbench.trt_cache"  # TensorRT timing cache: hit | miss
POSITIONS = "kgbench.positions"  # "sweep": reserved in the sweep's ledger; "run": the job's own stream
POSITIONS_LEDGER = "kgbench.positions_ledger"
WARNINGS = "kgbench.warnings"
RECOMMENDED_THREADS = "kgbench.recommended_threads"  # mode=engine: katago benchmark's recommendation
RECOMMENDED_SOURCE = "kgbench.recommended_source"
SYNTHETIC_NET = "synthetic_net"  # "true": a net with random weights (kgbench.nets synth), a throughput test
NET_NAME = "net_name"
NET_ARCH = "net_arch"
NET_GFLOPS_PER_EVAL = "net_gflops_per_eval"
NET_PARAMS = "net_params"
# the serving settings its kgserve ran with (kgbench.targets.serving): params serve.<key>, and these two tags
SERVING = "kgbench.serving"  # one line: the runtime's settings, except what the load generator needed
SERVING_CHANGES = "kgbench.serving_changes"  # those changes as JSON (key, runtime, measured, why)

# how it went
BOTTLENECK = "bottleneck"  # one word: what limited the job (kgbench.track.efficiency)
BOTTLENECK_FIGURES = "kgbench.bottleneck_figures"
BOTTLENECK_KNOB = "kgbench.bottleneck_knob"
GPU_METRICS_ABSENT = "kgbench.gpu_metrics_absent"
MFU_ABSENT = "kgbench.mfu_absent"
STATUS = "kgbench.status"  # ok | failed | killed (stopped by a signal, or its process found gone: track.reaper)
FAILURE_REASON = "kgbench.failure_reason"
# the process that runs a run (a sweep's parent, a job): when it is found gone while the run is RUNNING, the run is
# marked KILLED (kgbench.track.reaper)
OWNER_HOST = "kgbench.owner_host"
OWNER_PID = "kgbench.owner_pid"
OWNER_STARTED = "kgbench.owner_started"  # its process start time (epoch s): a reused pid is not the owner
# what went wrong in a job's target while it was measured (an engine restart, kgserve gone): the job is never
# promoted (kgbench.decide.selection), its figures stay for the record
FAULTS = "kgbench.faults"
LADDER_STOP = "kgbench.ladder_stop"
UNSTABLE = "kgbench.unstable"
INVALID = "kgbench.invalid"
INVALID_REASON = "kgbench.invalid_reason"
PRUNED = "kgbench.pruned"  # stopped early by the Optuna search's pruner
CONTENDED = "kgbench.contended"  # "true": measured beside other work, still so after its re-measures (track.contention)
CONTENTION = "kgbench.contention"  # the figures that decided it (the worst window's), or why it was not flagged
CONTENTION_ATTEMPTS = "kgbench.contention_attempts"  # each measurement of the job: contended or clean, and why
RACE = "kgbench.race"  # on a sweep: the race of its contenders (who, rounds, who separated, who stayed tied)

# promote
PROMOTED = "promoted"  # "true" on the run whose cfg runtime/ serves; "scratch" on one a scratch runtime serves
PROMOTED_SCRATCH_VALUE = "scratch"
PROMOTED_RUN = "kgbench.promoted_run"  # on a sweep: its promoted job run
PROMOTED_SCRATCH = "kgbench.promoted_scratch"  # the scratch runtime config a run was promoted into
VERIFY = "kgbench.verify"  # `python -m kgbench.promote --verify`'s last line about the runtime this run serves
