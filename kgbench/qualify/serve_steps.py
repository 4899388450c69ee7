"""The qualification's serving steps: the promoted runtime verified against its job's measured req/s
(`python -m kgbench.promote --verify`), `python -m kgserve` serving the promoted cfg, runtime/serve_analysis.sh
answering a sample through it, then kgserve against the engine's own stdin pipe at that cfg, for the 100-visit
load and the bulk `maxVisits 1` policy load, each with its efficiency and bottleneck."""

from __future__ import annotations

import asyncio
from typing import Any

from kgbench.decide import runs as runlib
from kgbench.decide.verify import VerifyError, verify
from kgbench.enginepipe.engineload import EngineLoadResult, nineteen_by_nineteen, run_engine_load
from kgbench.load.generator import run_load
from kgbench.load.traffic import QuerySource, load_games
from kgbench.load.types import HttpTarget, LoadResult, LoadSettings
from kgbench.qualify.context import Qualification
from kgbench.qualify.runner import StepFailed, StepRecord, run_command
from kgbench.targets.enginelog import parse_nn_stats
from kgbench.targets.kgserve_process import KgserveProcess
from kgbench.track.efficiency import JobFigures, bottleneck, efficiency_metrics
from kgbench.track.measure import MeasureWatch, headline_spans, over_spans
from kgserve.paths import PROJECT_ROOT
from kgserve.settings import load_settings

__all__ = ["serve_promoted", "stop_serving", "through_kgserve_and_pipe", "verify_promoted"]

POLICY_FIELDS = {"includePolicy": True, "includeOwnership": True}
SAMPLE = "lategame_19x19"
NO_CAUSE = "likely cause: none found"  # kgbench.decide.verify's line when the settings are the measured ones


def verify_promoted(q: Qualification, record: StepRecord) -> str:
    """`python -m kgbench.promote --verify` of the promoted runtime: served under its job's load, against the job's
    measured req/s and interval (kgbench.decide.verify)."""
    config = q.scratch_dir / "config.yaml"
    if not config.is_file():
        raise StepFailed("nothing was promoted: no runtime to verify")
    client = runlib.make_client(q.tracking_uri)
    attempts: list[list[str]] = []
    code = 1
    # verify's own advice when it finds no cause for a served figure below the job's: the job's interval may be
    # narrower than the run-to-run noise, run it again. The step does so once; both attempts stay in the record
    while len(attempts) < 2:
        lines: list[str] = []
        try:
            code = verify(config, load_settings(config), client, max_s=q.budget.share(0.06, 30), say=lines.append,
                          env=q.options.extra_env)  # fmt: skip
        except VerifyError as exc:
            raise StepFailed(str(exc)) from None
        attempts.append(lines)
        if code == 0 or not lines or NO_CAUSE not in lines[-1]:
            break
    record.data.update(lines=attempts[-1], exit=code, attempts=attempts)
    if code != 0:
        raise StepFailed(attempts[-1][-1] if attempts[-1] else f"verify exited {code}")
    again = f" (on the second attempt; the first: {attempts[0][-1]})" if len(attempts) > 1 else ""
    return attempts[-1][-1] + again


def serve_promoted(q: Qualification, record: StepRecord) -> str:
    config = q.scratch_dir / "config.yaml"
    if not config.is_file():
        raise StepFailed("nothing was promoted: no runtime to serve")
    settings = load_settings(config)
    process = KgserveProcess(config, q.out / "steps" / "kgserve.log", q.env())
    process.start()
    q.serving = process  # kept up for the pipe step; stop_serving ends it whatever happens
    startup = settings.engine.backend_settings().startup_timeout_s + 60
    process.wait_listening(min(startup, q.budget.share(0.1, 60)))
    start_s, ready = process.wait_ready(min(startup, q.budget.share(0.1, 60)))
    assert process.url is not None
    q.serving_url = process.url
    record.data.update(url=process.url, ready_s=start_s, readyz=ready)
    port = process.url.rsplit(":", 1)[1]
    out = q.out / "serve"
    out.mkdir(parents=True, exist_ok=True)  # an existing folder: serve_analysis.sh writes <stem>.jsonl into it
    argv = [str(PROJECT_ROOT / "runtime" / "serve_analysis.sh"), "--config", str(config), "--port", port]
    argv += ["-o", str(out), "-y", SAMPLE]
    done = run_command(argv, q.log("serve_analysis"), q.budget.share(0.05, 60), {**q.env(), "KG_PYTHON": q.python})
    answer = out / f"{SAMPLE}.jsonl"
    lines = answer.read_text(encoding="utf-8").splitlines() if answer.is_file() else []
    record.data.update(serve_analysis_exit=done.returncode, answer=str(answer), answer_lines=len(lines))
    if done.returncode != 0 or not lines:
        raise StepFailed(f"runtime/serve_analysis.sh exited {done.returncode} with {len(lines)} lines (see its log)")
    flags = " (synthetic net: throughput test)" if ready.get("synthetic_net") else ""
    answered = f"serve_analysis.sh answered {SAMPLE}: {len(lines)} lines"
    return f"kgserve ready in {start_s:.1f} s at {process.url}{flags}; {answered}"


def stop_serving(q: Qualification) -> dict[str, float]:
    """Stops the qualification's kgserve (if any); its engines' NN statistics from the log."""
    process, q.serving = q.serving, None
    if process is None:
        return {}
    process.stop(30.0)
    return parse_nn_stats(process.text())


def _settings(q: Qualification, visits: int, concurrency: int, fields: dict[str, Any] | None = None) -> LoadSettings:
    load = {k: v for k, v in q.options.scale.load.items() if k not in ("concurrency", "max_visits")}
    return LoadSettings.from_mapping(
        {**load, "concurrency": [concurrency], "max_visits": visits, "query_fields": dict(fields or {}), "seed": 7}
    )


def _figures(q: Qualification, gpu: dict[str, float], host: dict[str, float], **given: Any) -> dict[str, Any]:
    batch = q.best["cfg"].get("nnMaxBatchSize") if q.best else None
    figures = JobFigures(
        gpu=gpu,
        host=host,
        nn_max_batch=int(batch) if batch and str(batch).isdigit() else None,
        flops_per_eval=q.net.flops() if q.net else None,
        gemm_tflops=q.gemm.tflops if q.gemm else None,
        datasheet_tflops=q.gemm.datasheet_tflops if q.gemm else None,
        **given,
    )
    verdict = bottleneck(figures)
    return {**efficiency_metrics(figures), "bottleneck": verdict.kind, "bottleneck_figures": verdict.reason}


async def _through_kgserve(q: Qualification, url: str, load: LoadSettings) -> dict[str, Any]:
    process = q.serving
    assert process is not None
    queries = QuerySource(load_games(), seed=11)
    with MeasureWatch(lambda: process.proc.pid if process.proc else None) as watch:
        result: LoadResult = await run_load(HttpTarget(url), load, queries, None)
    head = result.headline()
    spans, successes = headline_spans(result)
    if head is None or not spans:
        return {"req_per_s": 0.0, "errors": sum(lv.errors for lv in result.levels)}
    figures = _figures(
        q,
        over_spans(watch.gpu.metrics, spans),
        over_spans(watch.host.metrics, spans),
        req_per_s=head.req_per_s,
        analyses_in_windows=successes,
        nn_evals_per_s=head.visits_per_s or None,
        nn_evals_basis="visits",
    )
    return {
        "req_per_s": head.req_per_s,
        "p50_ms": head.p50_ms,
        "p99_ms": head.p99_ms,
        "errors": head.errors,
        "concurrency": head.concurrency,
        **figures,
    }


async def _engine_alone(
    q: Qualification, visits: int, queries: int, concurrency: int, fields: dict[str, Any] | None
) -> dict[str, Any]:
    argv = [
        str(q.options.binary),
        "analysis",
        "-config",
        str(q.scratch_dir / "katago_serving.cfg"),
        "-model",
        str(q.model),
    ]
    with MeasureWatch() as watch:
        result: EngineLoadResult = await run_engine_load(
            argv, nineteen_by_nineteen(5), visits=visits, queries=queries, concurrency=concurrency, extra=fields,
            startup_timeout_s=q.budget.share(0.1, 60), run_timeout_s=q.budget.share(0.1, 60),
        )  # fmt: skip
    start = result.measured_until - result.measure_s
    figures = _figures(
        q,
        watch.gpu.metrics(start, result.measured_until),
        watch.host.metrics(start, result.measured_until),
        req_per_s=result.req_per_s,
        analyses_in_windows=result.measured,
        # the engine answered every query it was sent before it exited: its NN rows per answer are exact
        nn_rows=result.nn_rows or None,
        answered_total=result.answered,
        nn_evals_basis="rows",
        nn_avg_batch=result.nn_avg_batch or None,
    )
    return {"req_per_s": result.req_per_s, "errors": result.errors, "concurrency": concurrency,
            "engine_cores": result.cores_used, "startup_s": result.startup_s, **figures}  # fmt: skip


def through_kgserve_and_pipe(q: Qualification, record: StepRecord) -> str:
    """At the promoted cfg: the kgserve from the serve step under the 100-visit and the policy load, then (kgserve
    stopped, the GPU free) the same engine cfg over its own stdin pipe under the same two loads."""
    if q.best is None or q.serving_url is None or q.serving is None:
        raise StepFailed("no promoted cfg is being served")
    scale = q.options.scale
    analysis = int(q.best["cfg"].get("numAnalysisThreads", 8))
    hundred, policy = 2 * analysis, 4 * analysis
    results: dict[str, dict[str, Any]] = {}
    # through kgserve first (it is up from the serve step), then, kgserve stopped and the GPU free, the engine alone
    results["kgserve_analysis"] = asyncio.run(
        _through_kgserve(q, q.serving_url, _settings(q, scale.pipe_visits, hundred))
    )
    results["kgserve_policy"] = asyncio.run(_through_kgserve(q, q.serving_url, _settings(q, 1, policy, POLICY_FIELDS)))
    record.data["kgserve_nn"] = stop_serving(q)
    results["engine_analysis"] = asyncio.run(_engine_alone(q, scale.pipe_visits, scale.pipe_queries, hundred, None))
    results["engine_policy"] = asyncio.run(_engine_alone(q, 1, scale.pipe_policy_queries, policy, POLICY_FIELDS))
    ratios = {
        load: results[f"kgserve_{load}"]["req_per_s"] / results[f"engine_{load}"]["req_per_s"]
        for load in ("analysis", "policy")
        if results[f"engine_{load}"].get("req_per_s")
    }
    record.data.update(results=results, ratios=ratios, cfg=q.best["cfg"], visits=scale.pipe_visits)
    parts = []
    for load in ("analysis", "policy"):
        served, alone = results[f"kgserve_{load}"]["req_per_s"], results[f"engine_{load}"]["req_per_s"]
        name = f"{scale.pipe_visits} visits" if load == "analysis" else "policy"
        parts.append(f"{name}: kgserve {served:.1f} / engine {alone:.1f} req/s = {ratios.get(load, float('nan')):.2f}")
    return "; ".join(parts)
