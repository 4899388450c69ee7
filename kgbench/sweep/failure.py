"""`JobFailure`: a job that cannot produce figures. The sweep raises it wherever a job meets such a failure (its
spec, its positions, its measurement); `kgbench.sweep.job.run_job` records the one-line reason in the job's
MLflow run and the sweep goes on."""

from __future__ import annotations

__all__ = ["JobFailure"]


class JobFailure(RuntimeError):
    """A job that cannot produce figures; the message is the one-line failure reason."""
