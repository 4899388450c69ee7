"""`python -m kgserve [--config PATH] [--backend NAME] [--port N] [--host H]`: serve runtime/config.yaml.

- Start-up checks before anything runs: a missing engine binary, model or cfg exits with code 2 and one
  paragraph on stderr naming each missing path and the config key it came from. A config file that does
  not load also exits 2, and so does an engine cfg KataGo would not run as written (an unknown key, a value
  KataGo refuses: kgserve.katago.cfgcheck, docs/cfg.md). An engine that starts and then fails does not stop
  kgserve (/readyz says why), except one that refuses to start the same way every time: exit 3.
- `--port 0` binds a free port; once serving, kgserve logs `kgserve listening on http://HOST:PORT`.
- SIGTERM / SIGINT: stop accepting, let in-flight requests finish within server.grace_period_s (then
  they are cut, which terminates their queries), then close the pool (terminate_all, close stdin, wait,
  kill) and exit 0. A second SIGINT forces the exit.
- `--parent-pid PID` (or KGSERVE_PARENT_PID, which kgbench's jobs set): stop as on SIGTERM once that process is
  gone (kgserve.procs.parent), so a job's kgserve never outlives a killed sweep.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import math
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn

from kgserve.admission.proxies import TrustedProxies
from kgserve.engine.pool import EnginePool
from kgserve.engine.supervisor import EXIT_ENGINE_REFUSED
from kgserve.http.httpguard import ConnectionLimits, guarded_protocol
from kgserve.logformat import LineHandler, listening_line
from kgserve.preflight import cfg_content_problems, startup_problems
from kgserve.procs.malloc import tune_malloc
from kgserve.procs.parent import take_parent_pid, watch_parent
from kgserve.procs.workers import parse_worker, supervise, worker_settings
from kgserve.servedcfg import check_pair
from kgserve.settings import ConfigError, Settings, load_settings
from kgserve.ws.wsguard import guarded_websocket

__all__ = ["bind_socket", "main", "uvicorn_config"]

log = logging.getLogger("kgserve")
EXIT_STARTUP = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kgserve", description="Serve KataGo analysis over HTTP.")
    parser.add_argument("--config", type=Path, default=None, help="config file (default: runtime/config.yaml)")
    parser.add_argument("--backend", default=None, help="engine backend: cuda, trt, eigen or sim")
    parser.add_argument("--port", type=int, default=None, help="port (0: pick a free one)")
    parser.add_argument("--host", default=None, help="address to bind (default: server.host, 127.0.0.1)")
    parser.add_argument(
        "--model", default=None, help="a model file, or katrain (the net of the katrain extra): replaces engine.model"
    )
    parser.add_argument(
        "--throughput-test",
        action="store_true",
        default=None,
        help="serve a synthetic net (random weights: its analyses are noise) as a throughput test",
    )
    parser.add_argument(
        "--allow-unknown-cfg-key",
        action="append",
        default=None,
        metavar="KEY",
        help="let this cfg key through the start-up check (a key of a newer KataGo); adds to "
        "engine.allow_unknown_cfg_keys, may be repeated",
    )
    parser.add_argument(
        "--stay-up-on-engine-refusal",
        action="store_true",
        default=None,
        help="keep serving (unready, /readyz 503) when the engine refuses to start the same way every time, "
        "instead of exiting 3 (engine.stay_up_on_engine_refusal)",
    )
    parser.add_argument(
        "--parent-pid",
        type=int,
        default=None,
        help="stop when this process ends (default: KGSERVE_PARENT_PID; kgbench's jobs set it)",
    )
    parser.add_argument(
        "--worker", default=None, help=argparse.SUPPRESS
    )  # I/N: one of server.workers (kgserve.procs.workers)
    return parser


def _problem_paragraph(settings: Settings, problems: list[str]) -> str:
    text = "; ".join(problems)
    return (
        f"kgserve cannot start the {settings.engine.backend} engine: {text}. Fix the path in the config file "
        "(or fetch the release and network with runtime/fetch_katago.sh), or pick another backend with "
        "--backend (sim needs no GPU and no KataGo)."
    )


def _cfg_paragraph(settings: Settings, problems: list[str]) -> str:
    source = f" in {settings.source}" if settings.source else ""
    return (
        f"kgserve will not serve the KataGo cfg {settings.engine.cfg} (config key engine.cfg{source}), which KataGo "
        f"would not run as written: {'; '.join(problems)}. Fix the cfg; a key of a newer KataGo than v1.17.2 may be "
        "let through with engine.allow_unknown_cfg_keys or --allow-unknown-cfg-key KEY (docs/cfg.md)."
    )


def bind_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A bound socket for HOST:PORT (port 0: the kernel picks a free port); `reuse_port`: several processes
    may bind it (server.workers)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[
        0
    ]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class _Server(uvicorn.Server):
    """uvicorn's server, announcing the bound address once it accepts connections, and stopping (exit
    EXIT_ENGINE_REFUSED) when the engine pool reports a deterministic refusal, unless settings keep it up."""

    def __init__(self, config: uvicorn.Config, *, url_host: str, stay_up: bool = True) -> None:
        super().__init__(config)
        self.url_host = url_host
        self.stay_up = stay_up
        self.refusal: str | None = None
        self._watch: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and sockets:
            log.info("%s", listening_line(self.url_host, sockets[0].getsockname()[1]))
        pool = getattr(getattr(self.config.app, "state", None), "kgserve", None)
        pool = getattr(pool, "pool", None)
        if self.started and not self.stay_up and isinstance(pool, EnginePool):
            self._watch = asyncio.create_task(self._end_on_refusal(pool), name="kgserve-refusal-watch")

    async def _end_on_refusal(self, pool: EnginePool) -> None:
        await pool.refused.wait()
        self.refusal = pool.refusal
        log.error("kgserve stops: %s (engine.stay_up_on_engine_refusal keeps it up instead)", self.refusal)
        self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._watch is not None:
            self._watch.cancel()
        await super().shutdown(sockets=sockets)


def uvicorn_config(app: Any, settings: Settings) -> uvicorn.Config:
    """uvicorn's config for kgserve: the guarded protocol (kgserve.http.httpguard) and server.* timeouts.

    No uvicorn proxy-headers middleware: kgserve.forwarded reads X-Forwarded-For itself, from the proxies of
    server.trusted_proxies only (uvicorn's would take any text for an address, and count nothing)."""
    server = settings.server
    clients = app.state.kgserve.admission.clients  # per-client connection caps (kgserve.admission.clients)
    proxies = TrustedProxies(server.trusted_proxies)  # their connections are counted per request instead
    return uvicorn.Config(
        app,
        http=guarded_protocol(ConnectionLimits.from_settings(server), clients, proxies),
        ws=guarded_websocket(server.send_timeout_s),
        log_config=None,
        access_log=False,
        proxy_headers=False,
        lifespan="on",
        timeout_graceful_shutdown=max(1, math.ceil(server.grace_period_s)),
        timeout_keep_alive=server.keep_alive_timeout_s,  # type: ignore[arg-type]  # uvicorn takes a float fine
        # a WebSocket message is bounded like a request body: a bigger one closes the connection (1009)
        ws_max_size=settings.limits.max_body_bytes,
    )


async def _serve(settings: Settings, sock: socket.socket) -> int:
    """Serve until a signal (0) or an engine's deterministic refusal (EXIT_ENGINE_REFUSED)."""
    from kgserve.app import close_engines, create_app

    app = create_app(settings)
    config = uvicorn_config(app, settings)
    tune_gc()
    tune_malloc()
    server = _Server(
        config, url_host=_url_host(settings.server.host), stay_up=settings.engine.stay_up_on_engine_refusal
    )
    await server.serve(sockets=[sock])
    ctx = app.state.kgserve
    if ctx.pool is not None and not ctx.engines_closed:
        # A second SIGINT/SIGTERM makes uvicorn skip the app's shutdown (its "force exit"): the engines are
        # still running, and closing them later, from asyncio.Runner's cancellation of every task, waits on
        # tasks it has cancelled and never returns. Close them here, while their tasks run, with no grace: the
        # second signal asked for "now".
        log.warning("second signal: stopping the engines now, without the grace period")
        await close_engines(ctx, 0.0)
    return EXIT_ENGINE_REFUSED if server.refusal is not None else 0


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop uvicorn itself would run on (loop "auto"): uvloop where installed (uvicorn[standard])."""
    return uvicorn.Config("kgserve.app:create_app").get_loop_factory()


GC_YOUNG_THRESHOLD = 20_000  # allocations between young collections (Python's default: 700)


def tune_gc() -> None:
    """Garbage collection for a server: what start-up built stays (frozen: no collection walks it again),
    and young collections run every GC_YOUNG_THRESHOLD allocations instead of 700. A request's objects die
    by reference counting; a collection only walks those of the requests in flight, so fewer collections
    cost less in total (measured: ~100 µs of CPU per request with the defaults, docs/performance.md)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def _logging(level: str) -> None:
    # one log line per request: skip what the format never shows (the caller's frame, process, thread
    # names), as the logging HOWTO's "Optimization" section advises
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # LineHandler: logging's StreamHandler and format, plus a direct path for the access lines (kgserve.logformat)
    logging.basicConfig(level=level.upper(), handlers=[LineHandler(sys.stderr)])


def _worker_argv(args: argparse.Namespace, settings: Settings) -> list[str]:
    """The command line of a worker: this one's config and choices (the port comes from the supervisor)."""
    argv = ["--host", settings.server.host]
    if args.config is not None:
        argv += ["--config", str(args.config)]
    if args.backend is not None:
        argv += ["--backend", args.backend]
    if args.model is not None:
        argv += ["--model", args.model]
    if args.throughput_test:
        argv += ["--throughput-test"]
    for key in args.allow_unknown_cfg_key or ():
        argv += ["--allow-unknown-cfg-key", key]
    if args.stay_up_on_engine_refusal:
        argv += ["--stay-up-on-engine-refusal"]
    return argv


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(args.config).with_overrides(
            backend=args.backend,
            port=args.port,
            host=args.host,
            throughput_test=args.throughput_test,
            model=args.model,
            allow_unknown_cfg_keys=args.allow_unknown_cfg_key,
            stay_up_on_engine_refusal=args.stay_up_on_engine_refusal,
        )
    except ConfigError as exc:
        print(f"kgserve: {exc}", file=sys.stderr)
        return EXIT_STARTUP
    _logging(settings.server.log_level)
    parent = take_parent_pid(args.parent_pid)
    if parent is not None:  # a kgbench job's kgserve: it must not outlive the job (kgserve.procs.parent)
        watch_parent(parent, settings.server.grace_period_s)
    problems = startup_problems(settings)
    if problems:
        print(_problem_paragraph(settings, problems), file=sys.stderr)
        return EXIT_STARTUP
    try:
        check_pair(settings)  # config.yaml and the cfg from one promote, or refused naming both
    except ConfigError as exc:
        print(f"kgserve: {exc}", file=sys.stderr)
        return EXIT_STARTUP
    cfg_problems = cfg_content_problems(settings)
    if cfg_problems:
        print(_cfg_paragraph(settings, cfg_problems), file=sys.stderr)
        return EXIT_STARTUP
    from kgserve.auth import exposure_warning, token_from_env

    warning = exposure_warning(settings.server, token_from_env(settings.server))
    if warning:
        log.warning("%s", warning)
    workers = settings.server.workers
    if workers > settings.engine.processes:
        print(
            f"kgserve: server.workers ({workers}) is more than engine.processes ({settings.engine.processes}): "
            "each worker needs an engine of its own",
            file=sys.stderr,
        )
        return EXIT_STARTUP
    worker = parse_worker(args.worker) if args.worker else None
    if worker is not None:
        settings = worker_settings(settings, *worker)
    try:
        sock = bind_socket(settings.server.host, settings.server.port, reuse_port=workers > 1)
    except OSError as exc:
        print(
            f"kgserve cannot listen on {settings.server.host}:{settings.server.port} (server.host / server.port "
            f"or --host / --port): {exc.strerror or exc}",
            file=sys.stderr,
        )
        return EXIT_STARTUP
    if workers > 1 and worker is None:
        return supervise(settings, sock, _worker_argv(args, settings))
    # uvicorn re-raises the signal that stopped it once it has shut down; with these handlers that
    # second delivery is a no-op and kgserve exits 0 after a graceful shutdown.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            code = runner.run(_serve(settings, sock))
    finally:
        sock.close()
    log.info("kgserve stopped")
    return code
