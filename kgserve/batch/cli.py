"""`python -m kgserve.batch INPUT... -o OUT.jsonl (--url URL | --config runtime/config.yaml)`: analyse SGF records
or JSONL queries in bulk, one answer per query in OUT, resumable (docs/batch.md).

Exit status: 0 every row answered with analysis; 1 some row's answer is an error line (the summary says which);
2 the run could not start or was refused (bad input or options, a journal of other input or settings, a target
that cannot answer); 130 interrupted (rerun the same command to resume).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
import time
from pathlib import Path

from kgserve.batch.inputs import (
    INCLUDE_FLAGS,
    InputError,
    JsonlSource,
    PositionSpec,
    QuerySettings,
    RowSource,
    SgfSource,
    rows,
    survey,
)
from kgserve.batch.journal import Header, Journal, JournalRefused, journal_path
from kgserve.batch.plan import Target, TargetFailed
from kgserve.batch.progress import make_progress
from kgserve.batch.run import answer_rows
from kgserve.batch.summary import summary_text
from kgserve.batch.target_http import HttpTarget
from kgserve.batch.target_pool import PoolTarget
from kgserve.settings import ConfigError, load_settings

__all__ = ["main"]

EXIT_ERRORS, EXIT_REFUSED, EXIT_INTERRUPTED = 1, 2, 130


def _flag(name: str) -> str:
    """includePVVisits -> --include-pv-visits"""
    return "--" + re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", name).lower()


def _json_object(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"a JSON object is needed, e.g. '{{\"wideRootNoise\": 0.02}}', not {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kgserve.batch", description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path, help="SGF files or folders, or JSONL query files")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the answers, JSONL (OUT)")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="a kgserve, e.g. http://127.0.0.1:PORT (server.port of its runtime config)")
    target.add_argument("--config", type=Path, help="no server: run the engines of this runtime config here")
    parser.add_argument("--backend", help="with --config: the engine backend (cuda, trt, eigen, sim)")
    parser.add_argument("--token-env", help="with --url: the environment variable holding kgserve's bearer token")
    parser.add_argument("--jsonl", action="store_true", help="inputs are JSONL queries (default: by extension)")
    parser.add_argument("--positions", default="all", help="SGF: all, last, every:N or sample:K (default all)")
    parser.add_argument("--seed", type=int, default=0, help="SGF: the seed of sample:K (default 0)")
    parser.add_argument("--visits", type=int, help="maxVisits of every query")
    for name in INCLUDE_FLAGS:
        parser.add_argument(_flag(name), dest=name, action="store_true", help=f"{name}: true on every query")
    parser.add_argument("--override-settings", type=_json_object, help="JSON object: overrideSettings of every query")
    parser.add_argument("--concurrency", type=int, help="queries in flight (default: from the target's threads)")
    parser.add_argument("--max-attempts", type=int, default=30, help="tries of a row before its error line (30)")
    parser.add_argument("--restart", action="store_true", help="discard an earlier run's journal and start over")
    parser.add_argument("--progress-every", type=float, default=10.0, help="seconds between plain progress lines")
    return parser


def _source(args: argparse.Namespace) -> RowSource:
    jsonl = args.jsonl or all(p.suffix in (".jsonl", ".json", ".ndjson") for p in args.inputs)
    if jsonl:
        return JsonlSource(args.inputs)
    return SgfSource(args.inputs, PositionSpec.parse(args.positions, args.seed))


def _settings(args: argparse.Namespace) -> QuerySettings:
    if args.visits is not None and args.visits < 1:
        raise InputError("--visits must be at least 1")
    include = tuple(name for name in INCLUDE_FLAGS if getattr(args, name))
    return QuerySettings(args.visits, include, args.override_settings or {})


def _settings_text(settings: QuerySettings) -> str:
    parts = [f"visits {settings.visits}" if settings.visits else "visits as queried"]
    parts += list(settings.include)
    if settings.override:
        parts.append(f"overrideSettings {json.dumps(dict(settings.override), sort_keys=True)}")
    return ", ".join(parts)


def _target(args: argparse.Namespace) -> Target:
    if args.url:
        return HttpTarget(args.url, token_env=args.token_env)
    try:
        settings = load_settings(args.config).with_overrides(backend=args.backend)
    except ConfigError as exc:
        raise TargetFailed(str(exc)) from None
    return PoolTarget(settings)


async def _run(args: argparse.Namespace, source: RowSource, settings: QuerySettings, journal: Journal,
               total: int) -> tuple[int, float, float | None, dict[str, int]]:  # fmt: skip
    """(rows answered by the target, seconds, the engines' NN rows when they report them, retries by reason)"""
    target = _target(args)
    # SIGTERM ends the run as Ctrl-C does: the rows in flight are left (the journal has every answer so far) and
    # the engines of a --config run are closed, not left behind
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    await target.open()
    try:
        plan = await target.plan(args.concurrency)
        grouped = f", {plan.senders} requests of up to {plan.group}" if plan.group > 1 else ""
        print(f"batch: {total - len(journal.done)} of {total} rows to answer, {plan.concurrency} at a time "
              f"({plan.why}{grouped}), via {target.describe()}", file=sys.stderr)  # fmt: skip
        progress = make_progress(total, len(journal.done), every_s=args.progress_every)
        started = time.monotonic()
        try:
            await answer_rows(rows(source, settings), target, journal, progress,
                              plan=plan, max_attempts=args.max_attempts)  # fmt: skip
        finally:
            progress.close()
    finally:
        nn_rows = await target.close()
    return progress.sent, time.monotonic() - started, nn_rows, dict(progress.retries)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.max_attempts < 1 or (args.concurrency is not None and args.concurrency < 1):
        print("batch: --max-attempts and --concurrency must be at least 1", file=sys.stderr)
        return EXIT_REFUSED
    try:
        source = _source(args)
        settings = _settings(args)
        found = survey(source)
    except InputError as exc:
        print(f"batch: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    for record, why in found.problems.items():
        print(f"batch: skipped record {record}: {why}", file=sys.stderr)
    output, path = args.output, journal_path(args.output)
    if output.exists() and not path.exists() and not args.restart:
        print(f"batch: {output} exists (a finished run): add --restart to answer again over it", file=sys.stderr)
        return EXIT_REFUSED
    header = Header(found.digest, settings.digest(), found.rows, source.describe(), _settings_text(settings))
    try:
        journal = Journal.open(path, header, restart=args.restart)
    except JournalRefused as exc:
        print(f"batch: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    try:
        sent, elapsed, nn_rows, retries = asyncio.run(_run(args, source, settings, journal, found.rows))
        tally = journal.assemble(output, found.rows)
    except TargetFailed as exc:
        print(f"batch: {exc} (the answers so far are kept in {path}: rerun to resume)", file=sys.stderr)
        return EXIT_REFUSED
    except (KeyboardInterrupt, asyncio.CancelledError):
        print(f"batch: interrupted; the answers so far are kept in {path}: rerun the same command to resume",
              file=sys.stderr)  # fmt: skip
        return EXIT_INTERRUPTED
    finally:
        journal.close()
    # NN rows per visit only when every row was searched in this run (a resumed run's engines saw only part)
    nn_rows = nn_rows if sent == tally.rows else None
    text = summary_text(tally, sent=sent, elapsed_s=elapsed, nn_rows=nn_rows, skipped=found.problems, retries=retries)
    print(text, file=sys.stderr)
    print(f"batch: wrote {output}", file=sys.stderr)
    return EXIT_ERRORS if tally.failed else 0
