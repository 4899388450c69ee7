"""The qualification's steps in order, each with its share of the budget and what it needs to run."""

from __future__ import annotations

from functools import partial

from kgbench.qualify.context import Qualification
from kgbench.qualify.report import write_report
from kgbench.qualify.runner import StepRecord, run_step
from kgbench.qualify.serve_steps import serve_promoted, stop_serving, through_kgserve_and_pipe, verify_promoted
from kgbench.qualify.setup_steps import check_build, describe_node, measure_gemm_rate, resolve_net
from kgbench.qualify.sweep_steps import engine_benchmark, promote_best, user_line, wide_sweep

__all__ = ["ALWAYS", "STEPS", "qualify"]

# (name, title, action, seconds it needs at least, whether later steps can go on without it)
STEPS = (
    ("node", "the node: cores, memory, GPU and driver", describe_node, 0.0, True),
    ("build", "the KataGo build runs and names its backend", check_build, 0.0, False),
    ("net", "the network: architecture and FLOPs per evaluation", resolve_net, 0.0, False),
    ("gemm", "the GPU's measured dense FP16 matrix-product rate", measure_gemm_rate, 10.0, True),
    ("benchmark", "katago benchmark over search threads", engine_benchmark, 30.0, True),
    ("line", "the user's line: backend=cuda,trt nnMaxBatchSize=64,128,256", user_line, 30.0, False),
    ("wide", "a wider sweep along the line's bottleneck", wide_sweep, 30.0, True),
    ("promote", "promote the best run into the results' runtime", promote_best, 5.0, False),
    ("verify", "served from it at its job's measured req/s (promote --verify)", verify_promoted, 10.0, True),
    ("serve", "python -m kgserve serves it; serve_analysis.sh answers a sample", serve_promoted, 15.0, False),
    ("pipe", "kgserve against the engine's own pipe: 100 visits and policy", through_kgserve_and_pipe, 20.0, True),
)


# the steps every qualification runs: what the others stand on (the node, the build, the net, the GPU's rate)
ALWAYS = ("node", "build", "net", "gemm")
# the budget each measuring step's deadlines add up to (their `budget.share` calls): what --steps redistributes
SHARES = {"benchmark": 0.12, "line": 0.33, "wide": 0.22, "promote": 0.03, "serve": 0.15, "pipe": 0.2}


def qualify(q: Qualification) -> int:
    """Runs the steps; a step another depends on that fails skips the rest. Exit 0 when every step ran (ok or
    skipped for a stated reason), 1 when one failed or was cut; the report is written either way."""
    stopped: str | None = None
    if q.options.steps is not None:  # the steps asked for get the time of those left out, in proportion
        asked_share = sum(SHARES.get(name, 0.0) for name in q.options.steps)
        q.budget.widen = max(1.0, sum(SHARES.values()) / asked_share) if asked_share else 1.0
    try:
        for name, title, action, needs_s, optional in STEPS:
            if stopped is not None:
                q.records.append(StepRecord(name, title, "skipped", summary=f"skipped: step {stopped} failed"))
                continue
            asked = q.options.steps
            if asked is not None and name not in asked and name not in ALWAYS:
                q.records.append(StepRecord(name, title, "skipped", summary="skipped: not asked (--steps)"))
                continue
            record = run_step(q.records, q.budget, name, title, partial(action, q), needs_s=needs_s)
            if record.status in ("failed", "cut") and not optional:
                stopped = name
    finally:
        stop_serving(q)  # a kgserve left by a failed step never outlives the qualification
        report = write_report(q)
        q.budget.note(f"report: {report}")
    return 0 if all(r.status in ("ok", "skipped") for r in q.records) else 1
