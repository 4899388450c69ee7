"""`python -m kgbench.promote`: the best run of a sweep becomes the served configuration.

    python -m kgbench.promote [--sweep ID] [--experiment NAME] [--run ID] [--slo-p99-ms X]
                              [--objective req_per_s|goodput|turns_per_s] [--slo-ms X]
                              [--allow-simulated] [--allow-synthetic] [--config runtime/config.yaml]
                              [--runtime-dir DIR] [--dry-run] [--explain] [--diff]
    python -m kgbench.promote --verify [--config runtime/config.yaml | --runtime-dir DIR] [--verify-seconds S]

1. keeps the sweep's runs of the runtime it writes (kgbench.decide.runtimes: the same runtime config, backend
   family, model and machine) and refuses, naming both, when there are none: after a CPU or a simulated sweep, a
   plain promote never touches the tracked GPU files;
2. picks the winner among them by the rule in kgbench.decide.selection (`--explain` prints the rule, every run's
   verdict and the decision): overlapping 95% intervals are ties, broken by a p99 lower beyond its noise (the
   leader's over 25% above it), else the higher value; the objective is req/s, or goodput (req/s finished
   within --slo-ms; default: the SLO each run logged, load.slo_ms);
3. writes its `katago.cfg` artifact to engine.cfg (runtime/katago_serving.cfg) atomically, under a
   `# kgbench-promote:` provenance header (kgserve.provenance) (`--diff` prints the change);
4. sets engine.backend in runtime/config.yaml, and engine.processes when the winner measured another count (only
   those values change; comments stay);
5. tags the run promoted=true and the previously promoted run(s) promoted=false;
6. says what it did in one line (kgbench.decide.verdict): the runtime's serving settings against those the winner
   was measured with, every one that differs named (kgbench.decide.served), how to serve it and how to check it.
`--verify` checks a written runtime instead: kgserve serves it under the load of the job its cfg came from and
its req/s is printed against the job's interval; below it, exit 1 naming the likely cause (kgbench.decide.verify).
A synthetic net's winner (with --allow-synthetic: random weights, a throughput test) always goes to a scratch
runtime with engine.throughput_test set: the tracked runtime never serves one.
A simulated sweep (with --allow-simulated) and no --config, or --runtime-dir DIR, write steps 3-4 into a scratch
runtime instead (runtime/scratch/ by default, git-ignored; see kgbench.decide.scratch) with the KataGo and model the
runs named on the command line and the serving settings the winner was measured with, and tag the run
promoted=scratch and kgbench.promoted_scratch=<its config>; the tracked runtime/ files and their promoted=true run
stay as they are.
Exit status: 0 promoted (or dry run), 1 nothing eligible / refused, 2 bad configuration or arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from kgbench.decide import runs as runlib
from kgbench.decide.cfgwrite import (
    FileSwap,
    RuntimeBusy,
    runtime_lock,
    set_engine_backend,
    set_engine_value,
    unified_diff,
)
from kgbench.decide.integrity import IntegrityError, Measured, checked_binary, measured_record
from kgbench.decide.runtimes import CrossRuntime, RuntimeChoice, choose_runs, shown_path
from kgbench.decide.scratch import CONFIG_NAME, DEFAULT_SCRATCH_DIR, ScratchRuntime, scratch_runtime, serve_command
from kgbench.decide.selection import (
    OBJECTIVES,
    Candidate,
    Selection,
    choose_winner,
    format_table,
    objective_for,
    rule_text,
)
from kgbench.decide.served import MeasuredServing, measured_serving, served_clause, served_of_text
from kgbench.decide.verdict import verdict_line
from kgbench.decide.verify import VerifyError, verify, verify_command
from kgbench.track.record import text_sha256
from kgbench.track.runtime_id import this_machine
from kgbench.track.schema import (
    GIT_COMMIT,
    KATAGO_VERSION,
    MODEL_FILE,
    MODEL_SHA256,
    PARENT_RUN,
    PROMOTED,
    PROMOTED_RUN,
    PROMOTED_SCRATCH,
    PROMOTED_SCRATCH_VALUE,
    SWEEP_ID,
    tracking_uri,
)
from kgbench.track.store_errors import describe, readable_runs, store_error
from kgserve.provenance import render_header, split_header
from kgserve.servedcfg import check_pair
from kgserve.settings import DEFAULT_CONFIG_PATH, ConfigError, Settings, load_settings

__all__ = ["PromoteError", "build_header_fields", "main", "promote"]

# a test's hook: sleep this many seconds between the cfg's write and config.yaml's (tests kill promote there)
PAUSE_ENV = "KGBENCH_TEST_PAUSE_BETWEEN_WRITES"
LOCK_WAIT_S = 120.0  # how long a promote waits for another one writing the same runtime
SYNTHETIC_WARNING = (
    "SYNTHETIC NET: this cfg won a sweep of a net with random weights (kgbench.nets synth). Its throughput is the "
    "real architecture's; its analyses are noise: serve it only as a throughput test"
)
SIMULATED_WARNING = (
    "SIMULATED ENGINE RESULTS: this cfg won a sweep of kgserve.sim, not of KataGo on a GPU. "
    "Its numbers say nothing about real serving; re-run the sweep on the GPU before relying on it"
)


class PromoteError(Exception):
    """Promotion refused or impossible; the message says why (exit status 1)."""


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def build_header_fields(
    run: Run, winner: Candidate, sweep_id: str, slo_p99_ms: float | None, rule: str | None = None
) -> dict[str, str]:
    tags = run.data.tags
    fields: dict[str, str] = {}
    if winner.simulated:
        fields["WARNING"] = SIMULATED_WARNING
    elif winner.synthetic:
        fields["WARNING"] = SYNTHETIC_WARNING
    fields.update(
        {
            "run_id": run.info.run_id,
            "sweep_id": sweep_id,
            "experiment_id": run.info.experiment_id,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "backend": winner.backend,
            "model": tags.get(MODEL_FILE, ""),
            "model_sha256": tags.get(MODEL_SHA256, ""),
            "katago_version": tags.get(KATAGO_VERSION, ""),
            "req_per_s": _fmt(winner.req_per_s),
            "req_per_s_ci95": f"{_fmt(winner.req_per_s_low)}..{_fmt(winner.req_per_s_high)}",
            "goodput_per_s": _fmt(winner.goodput_per_s),
            "goodput_slo_ms": _fmt(winner.slo_ms),
            "p50_ms": _fmt(winner.p50_ms),
            "p99_ms": _fmt(winner.p99_ms),
            "simulated": "true" if winner.simulated else "false",
            "synthetic_net": "true" if winner.synthetic else "false",
            "config": winner.label,
            "git_commit": tags.get(GIT_COMMIT, ""),
            "rule": (rule or rule_text()) + (f"; SLO p99 <= {slo_p99_ms:g} ms" if slo_p99_ms is not None else ""),
        }
    )
    return fields


@dataclass(frozen=True, slots=True)
class _Chosen:
    selection: Selection
    sweep_id: str
    runs: RuntimeChoice  # the runs the rule chose among, of the runtime promote writes
    explained: list[str]  # what --explain prints before the verdict


def _select(client: MlflowClient, args: argparse.Namespace, settings: Settings) -> _Chosen:
    explained: list[str] = []
    for line in runlib.mark_dead_runs(client, args.experiment, "promote"):  # a killed sweep's runs: not RUNNING
        print(line, file=sys.stderr)
    if args.run:
        run = client.get_run(args.run)
        if not readable_runs([run]):
            raise PromoteError(f"run {args.run} cannot be read (above); nothing promoted")
        sweep_id = run.data.tags.get(SWEEP_ID) or run.data.tags.get(PARENT_RUN) or "-"
        runs = [run]
        explained.append(f"run {args.run} chosen explicitly (the rule still applies to it)")
    else:
        parent = runlib.find_sweep(client, args.experiment, args.sweep)
        sweep_id = runlib.sweep_id_of(parent)
        runs = runlib.sweep_children(client, parent)
        explained.append(f"sweep {sweep_id} (parent run {parent.info.run_id}): {len(runs)} runs")
        if parent.info.status == "RUNNING":
            print(f"warning: sweep {sweep_id} is still running (or was killed): its later jobs are missing",
                  file=sys.stderr)  # fmt: skip
    if not runs:
        raise PromoteError(f"sweep {sweep_id} has no job runs")
    chosen = choose_runs(
        runs,
        settings,
        scratch_requested=args.runtime_dir is not None,
        config_named=args.config is not None,
        here=this_machine(),
        sweep=sweep_id,
    )
    cands = runlib.candidates(chosen.runs)
    args.objective = args.objective or objective_for(cands)  # turns/s for review, interactive or mixed traffic
    if args.objective == "goodput" and args.slo_ms is not None:
        cands = runlib.goodput_at(client, chosen.runs, cands, args.slo_ms)
    selection = choose_winner(
        cands, args.slo_p99_ms, args.allow_simulated, args.objective, allow_synthetic=args.allow_synthetic
    )
    return _Chosen(selection, sweep_id, chosen, explained)


def _rule(args: argparse.Namespace) -> str:
    return rule_text(args.objective, args.slo_ms)


class _Tags:
    """The tags promote sets, each with the value it replaces, so that a store that refuses one puts the others
    back (best effort: the store may refuse that too, and then the line says so)."""

    def __init__(self, client: MlflowClient) -> None:
        self.client = client
        self._undo: list[tuple[str, str, str | None]] = []  # (run id, tag, the value before; None: none)

    def set(self, run: Run, key: str, value: str) -> None:
        before = run.data.tags.get(key)
        self.client.set_tag(run.info.run_id, key, value)
        self._undo.append((run.info.run_id, key, before))

    def undo(self) -> str:
        """ "" when every tag is back, else what could not be put back."""
        failed = []
        for run_id, key, before in reversed(self._undo):
            try:
                if before is None:
                    self.client.delete_tag(run_id, key)
                else:
                    self.client.set_tag(run_id, key, before)
            except Exception:
                failed.append(f"{key} of run {run_id[:8]}")
        self._undo.clear()
        return ", ".join(failed)


def _retag(tags: _Tags, winner: Run) -> list[str]:
    """The winner promoted=true first, then the runs promoted before false: a store that fails half way never leaves
    the runtime's run unmarked while another's mark was taken away."""
    client = tags.client
    previous = [
        r for r in runlib.promoted_runs(client, [winner.info.experiment_id]) if r.info.run_id != winner.info.run_id
    ]
    tags.set(winner, PROMOTED, "true")
    for run in previous:
        tags.set(run, PROMOTED, "false")
    parent_id = winner.data.tags.get(PARENT_RUN)
    if parent_id:
        tags.set(client.get_run(parent_id), PROMOTED_RUN, winner.info.run_id)
    return [run.info.run_id for run in previous]


def _retag_scratch(tags: _Tags, winner: Run, config_path: Path) -> None:
    """The winner serves the scratch runtime (promoted=scratch, unless the tracked runtime serves it too); the runs
    that served that scratch runtime before no longer do."""
    tags.set(winner, PROMOTED_SCRATCH, str(config_path))
    if winner.data.tags.get(PROMOTED) != "true":
        tags.set(winner, PROMOTED, PROMOTED_SCRATCH_VALUE)
    for run in runlib.scratch_promoted_runs(tags.client, [winner.info.experiment_id], str(config_path)):
        if run.info.run_id != winner.info.run_id and run.data.tags.get(PROMOTED) == PROMOTED_SCRATCH_VALUE:
            tags.set(run, PROMOTED, "false")


def _write_both(
    cfg_path: Path, old_cfg: str, new_cfg: str, config_path: Path, old_config: str, new_config: str
) -> FileSwap:
    """The cfg, then config.yaml; if the second write fails the first is put back (both or neither). The swap
    returned puts both back if tagging the run then fails. A crash between the two leaves a pair kgserve refuses
    (config.yaml names the cfg it was written with: kgserve.servedcfg)."""
    swap = FileSwap()
    try:
        swap.write(cfg_path, new_cfg)
    except OSError as exc:
        raise PromoteError(f"cannot write {cfg_path}: {_os_line(exc)}; nothing changed") from exc
    pause = os.environ.get(PAUSE_ENV)
    if pause:
        print(f"kgbench-promote: {cfg_path} written, pausing {pause} s before {config_path}", file=sys.stderr,
              flush=True)  # fmt: skip
        time.sleep(float(pause))
    if new_config == old_config:
        return swap
    try:
        swap.write(config_path, new_config)
    except OSError as exc:
        raise PromoteError(
            f"cannot write {config_path}: {_os_line(exc)}; {cfg_path} restored, nothing changed"
        ) from exc
    return swap


def _os_line(exc: OSError) -> str:
    return describe(exc) or exc.strerror or str(exc)


def _refusal(selection: Selection, sweep_id: str) -> PromoteError:
    hint = " (simulated runs need --allow-simulated)" if selection.only_simulated_blocked() else ""
    if selection.only_synthetic_blocked():
        hint = " (runs of a synthetic net need --allow-synthetic: a throughput test, promoted to a scratch runtime)"
    if any(v.candidate.contended for v in selection.verdicts):
        hint = " (contended runs were set aside: re-run the sweep, or those jobs, on a quiet machine)"
    if all(v.candidate.extra.get("mode") == "engine" for v in selection.verdicts):
        hint = " (a mode=engine sweep measures `katago benchmark`, not serving: promote a load sweep)"
    reasons = sorted({v.reason for v in selection.verdicts if v.reason})
    why = f": {'; '.join(reasons[:4])}" if reasons else ""
    return PromoteError(f"no run of sweep {sweep_id} satisfies the rule{why}{hint}; nothing promoted")


def promote(args: argparse.Namespace, settings: Settings, client: MlflowClient) -> int:
    chosen = _select(client, args, settings)
    selection, sweep_id = chosen.selection, chosen.sweep_id
    if args.explain:
        print("\n".join(chosen.explained))
        slo = f" (SLO: p99 <= {args.slo_p99_ms:g} ms)" if args.slo_p99_ms is not None else ""
        print(f"rule: {_rule(args)}{slo}")
        print(format_table(selection))
        if selection.decision is not None:
            print(f"decision: {selection.decision.explanation}")
    if chosen.runs.left_out:
        print(chosen.runs.left_out_line())
    for line in selection.set_aside():
        print(line)
    winner = selection.winner
    if winner is None:
        raise _refusal(selection, sweep_id)
    if winner.backend not in settings.engine.backends:
        raise PromoteError(
            f"the winner's backend {winner.backend!r} is not configured under engine.backends in "
            f"{settings.source}; nothing promoted"
        )
    run = client.get_run(winner.run_id)
    if winner.simulated:
        print(f"!!! {SIMULATED_WARNING} !!!", file=sys.stderr)
    elif winner.synthetic:
        print(f"!!! {SYNTHETIC_WARNING} !!!", file=sys.stderr)

    # what the job recorded at measure time, checked against its params: never a tag (kgbench.decide.integrity)
    try:
        recorded = measured_record(client, run)
    except IntegrityError as exc:
        raise PromoteError(str(exc)) from exc
    _, body = split_header(recorded.cfg_text)
    new_cfg = render_header(build_header_fields(run, winner, sweep_id, args.slo_p99_ms, _rule(args)), body)
    tie = (run.info.run_id, text_sha256(new_cfg))
    measured = measured_serving(run, recorded.record.serving_changes)
    target = _target(args, settings, winner, chosen.runs.scratch, measured, recorded, tie)
    # one promote at a time reads and writes a runtime's two files (a dry run writes nothing: no lock)
    lock = contextlib.nullcontext() if args.dry_run else runtime_lock(target.config_path.parent, LOCK_WAIT_S)
    with lock:
        return _write_runtime(args, client, run, selection, target, new_cfg, measured, settings, tie)


def _write_runtime(
    args: argparse.Namespace,
    client: MlflowClient,
    run: Run,
    selection: Selection,
    target: _Target,
    new_cfg: str,
    measured: MeasuredServing,
    settings: Settings,
    tie: tuple[str, str],
) -> int:
    winner = selection.winner
    assert winner is not None
    cfg_path, config_path = target.cfg_path, target.config_path
    old_cfg = cfg_path.read_text(encoding="utf-8") if cfg_path.exists() else ""
    old_config = config_path.read_text(encoding="utf-8") if config_path.exists() else ""
    if target.scratch is not None:
        new_config = target.scratch.config_text
    else:
        new_config = _in_place(
            old_config, config_path, winner.backend, settings, measured.engines(run.data.params), tie
        )
    serving = served_clause(served_of_text(new_config), measured)
    if args.diff:
        print(unified_diff(old_cfg, new_cfg, f"{cfg_path} (before)", f"{cfg_path} (promoted)") or "cfg unchanged")
        print(
            unified_diff(old_config, new_config, str(config_path), f"{config_path} (promoted)")
            or f"{config_path}: engine.backend already {winner.backend}"
        )

    print(verdict_line(selection, "would promote" if args.dry_run else "promoted"))
    where = _where(target, winner.backend)
    if args.dry_run:
        print(f"dry run: nothing written, no run tagged; it would write {where} ({serving}); --diff shows the changes")
        return 0
    swap = _write_both(cfg_path, old_cfg, new_cfg, config_path, old_config, new_config)
    tags = _Tags(client)
    previous: list[str] = []
    try:
        if target.scratch is not None:
            # the tracked runtime still serves what it served: its promoted=true run keeps its tag
            _retag_scratch(tags, run, config_path)
        else:
            previous = _retag(tags, run)
    except Exception as exc:  # the store refused a tag: the files go back, so that runtime and store agree
        swap.undo()
        left = tags.undo()
        why = store_error(exc, client.tracking_uri) or f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        kept = f"; these tags could not be put back: {left}" if left else ""
        line = f"cannot tag run {winner.run_id} promoted: {why}; the runtime files restored, nothing promoted{kept}"
        raise PromoteError(line) from exc
    swap.keep()
    explicit = args.config is not None or target.scratch is not None
    serve = serve_command(config_path) if explicit else "python -m kgserve"
    untagged = f"; run(s) {', '.join(p[:8] for p in previous)} no longer promoted" if previous else ""
    verify = verify_command(config_path if explicit else None)
    engine = f"; engine {target.engine}" if target.engine else ""
    print(f"wrote {where}{untagged}; {serving}{engine}; serve it with: {serve}; check it with: {verify}")
    return 0


def _in_place(
    text: str, config_path: Path, backend: str, settings: Settings, engines: int | None, tie: tuple[str, str]
) -> str:
    """The runtime config with the winner's backend, engine processes when it measured another count, and the
    run and sha256 of the cfg written with it (kgserve refuses the pair when they differ: kgserve.servedcfg)."""
    try:
        text = set_engine_backend(text, backend)
        if engines is not None and engines != settings.engine.processes:
            text = set_engine_value(text, "processes", engines)
        text = set_engine_value(text, "cfg_sha256", tie[1])
        text = set_engine_value(text, "cfg_run_id", tie[0])  # added under backend: above the sha256
    except ValueError as exc:
        raise PromoteError(f"cannot edit {config_path}: {exc}") from exc
    return text


@dataclass(frozen=True, slots=True)
class _Target:
    cfg_path: Path
    config_path: Path
    scratch: ScratchRuntime | None  # None: the config file given (or runtime/config.yaml) and its cfg
    why: str = ""  # why a scratch runtime
    engine: str = ""  # the KataGo the job ran, written into the scratch runtime and checked ("": the config's)


def _where(target: _Target, backend: str) -> str:
    if target.scratch is None:
        return f"{shown_path(target.cfg_path)} and engine.backend: {backend} in {shown_path(target.config_path)}"
    tracked = DEFAULT_CONFIG_PATH.parent.name
    return f"the scratch runtime {shown_path(target.scratch.directory)}/ ({target.why}; {tracked}/ files untouched)"


def _target(
    args: argparse.Namespace,
    settings: Settings,
    winner: Candidate,
    scratch: str | None,
    measured: MeasuredServing,
    recorded: Measured,
    tie: tuple[str, str],
) -> _Target:
    """Where the promotion is written: a scratch runtime (`scratch` says why; a synthetic net's winner always goes
    to one), with the KataGo and model the job recorded having run (the KataGo checked: the file it measured, and it
    runs); else the runtime config itself (edited in place) and its cfg."""
    why = scratch or ("a synthetic net's winner never goes into a runtime config in place" if winner.synthetic else "")
    record = recorded.record
    if why:
        try:
            engine = checked_binary(record) if record.engine_binary else ""
        except IntegrityError as exc:
            raise PromoteError(str(exc)) from exc
        folder = scratch_runtime(
            settings,
            winner.backend,
            args.runtime_dir,
            throughput_test=winner.synthetic,
            binary=record.engine_binary,
            model=record.engine_model,
            serving=measured.runtime_values(),
            tie=tie,
        )
        return _Target(folder.cfg_path, folder.config_path, folder, why, engine)
    if record.engine_binary or record.engine_model:  # its tags said otherwise, or choose_runs would have left it out
        ran = record.engine_binary or record.engine_model
        raise PromoteError(
            f"run {winner.run_id} ran {ran}, named on its command line, not the runtime config's: promote it into a "
            "runtime of its own with --runtime-dir DIR; nothing written"
        )
    return _Target(settings.engine.cfg, Path(settings.source or args.config), None)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kgbench.promote", description=__doc__.split("\n\n")[0])
    p.add_argument("--sweep", help="sweep id (tag kgbench.sweep_id) or parent run id; default: the latest sweep")
    p.add_argument("--experiment", help=runlib.EXPERIMENT_HELP)
    p.add_argument("--run", help="promote this run (the rule still applies)")
    p.add_argument("--slo-p99-ms", type=float, default=None, help="only runs with p99 <= this many ms")
    p.add_argument("--objective", choices=OBJECTIVES, default=None,
                   help="what the winner maximises: req/s, goodput (req/s within --slo-ms) or turns/s (analysed "
                        "turns; the default when a run's load.traffic is review, interactive or mixed; else "
                        "req/s)")  # fmt: skip
    p.add_argument("--slo-ms", type=float, default=None,
                   help="goodput's latency objective in ms (default: each run's load.slo_ms)")  # fmt: skip
    p.add_argument("--allow-simulated", action="store_true", help="allow a simulated run to win (labelled)")
    p.add_argument(
        "--allow-synthetic",
        action="store_true",
        help="allow a run of a synthetic net (random weights) to win; it goes to a scratch runtime (throughput test)",
    )
    p.add_argument("--config", type=Path, default=None, help=f"default {DEFAULT_CONFIG_PATH}")
    p.add_argument(
        "--runtime-dir",
        type=Path,
        default=None,
        help="write a scratch runtime (config.yaml + cfg) there, the runtime config untouched; a simulated "
        f"winner goes to {DEFAULT_SCRATCH_DIR} unless --config is given",
    )
    p.add_argument("--tracking-uri", default=None, help="default: MLFLOW_TRACKING_URI or sqlite:///<repo>/mlflow.db")
    p.add_argument("--dry-run", action="store_true", help="say what would be promoted and where; write nothing")
    p.add_argument("--explain", action="store_true", help="print the rule, every run with its verdict, the decision")
    p.add_argument("--diff", action="store_true", help="print the diffs of the cfg and the runtime config")
    p.add_argument(
        "--verify",
        action="store_true",
        help="check the runtime (--config, or --runtime-dir's config.yaml) instead of promoting: serve it under its "
        "job's load, served req/s against the job's interval; exit 1 below it, naming the likely cause",
    )
    p.add_argument("--verify-seconds", type=float, default=None,
                   help="--verify: load it at most this long (default: the job's own windows)")  # fmt: skip
    return p


def _verify_main(args: argparse.Namespace) -> int:
    path = args.runtime_dir / CONFIG_NAME if args.runtime_dir is not None else (args.config or DEFAULT_CONFIG_PATH)
    try:
        settings = load_settings(path)
        check_pair(settings)  # the pair first: a runtime of two runs is not one to measure
        return verify(Path(path), settings, runlib.make_client(args.tracking_uri), max_s=args.verify_seconds)
    except (ConfigError, VerifyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # the one cfg it downloads is small: MLflow's progress bar for it would be most of promote's output
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    if args.slo_ms is not None and not args.slo_ms > 0:
        print(f"error: --slo-ms must be > 0, got {args.slo_ms:g}", file=sys.stderr)
        return 2
    if args.slo_ms is not None and args.objective != "goodput":
        print("error: --slo-ms is goodput's objective: use it with --objective goodput", file=sys.stderr)
        return 2
    try:
        return _verify_main(args) if args.verify else _promote_main(args)
    except Exception as exc:  # a full, damaged or unreachable store: its one line (anything else is a bug: shown)
        if (error := store_error(exc, args.tracking_uri or tracking_uri())) is None:
            raise
        print(f"error: {error}; nothing {'checked' if args.verify else 'promoted'}", file=sys.stderr)
        return 1


def _promote_main(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return promote(args, settings, runlib.make_client(args.tracking_uri))
    except (PromoteError, CrossRuntime, runlib.SweepNotFound, RuntimeBusy) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
