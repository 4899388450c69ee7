"""runtime/config.yaml: the one file that says how kgserve serves.

`load_settings(path)` reads and validates it. A wrong type or an unknown key raises `ConfigError`
naming the key and the file. Relative paths in the file are resolved against the file's folder.
"""

from __future__ import annotations

import ipaddress
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kgserve.katago.netfile import KATRAIN_NET, KatrainNetMissing, katrain_model_path
from kgserve.paths import PROJECT_ROOT

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "BackendSettings",
    "BalancerBackend",
    "BalancerSettings",
    "ClusterSettings",
    "ConfigError",
    "EngineSettings",
    "LimitsSettings",
    "PrioritySettings",
    "ServerSettings",
    "Settings",
    "SweepNodeSettings",
    "WebSocketSettings",
    "is_loopback",
    "load_settings",
]

DEFAULT_CONFIG_PATH = PROJECT_ROOT / "runtime" / "config.yaml"
BACKEND_NAMES = ("cuda", "trt", "eigen", "sim")


class ConfigError(Exception):
    """A configuration file that cannot be used; the message names the key and the file."""


# a value a shell or the environment reads is validated for what it is and never evaluated (issue 44): an
# environment variable's name, a host name or address
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HOST_NAME_RE = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
_SHA256_RE = re.compile(r"[0-9a-f]{64}")


def env_name(value: str | None) -> str | None:
    """An environment variable's name as configured, or ValueError (pydantic names the key)."""
    if value is not None and not _ENV_NAME_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
    return value


def file_name(value: str) -> str:
    """A file name from the config that a script writes under its folder: no folder in it, not `.` or `..`."""
    if not value or "/" in value or "\\" in value or value in (".", "..") or "\0" in value:
        raise ValueError(f"{value!r} is not a plain file name (no '/', not '.' or '..')")
    return value


def _check_backend_keys(value: Mapping[str, Any]) -> None:
    """ValueError naming the keys of a mapping keyed by backend (engine.backends, release.assets) that are no known
    backend (pydantic names the key)."""
    unknown = sorted(set(value) - set(BACKEND_NAMES))
    if unknown:
        raise ValueError(f"unknown backend(s) {unknown}; expected some of {list(BACKEND_NAMES)}")


def host_value(value: str) -> str:
    """A host kgserve may bind: an IP address or a DNS name, nothing a shell could read otherwise."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    if not _HOST_NAME_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not an IP address or a host name")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(ge=0, le=65535)  # no default: runtime/config.yaml is the only place it is set
    auth_token_env: str | None = None
    grace_period_s: float = Field(30.0, ge=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    docs: bool = True  # GET /docs (Swagger UI) and /openapi.json; false: both 404 (kgserve.http.apidocs)
    # what a connection may do (kgserve.http.httpguard, docs/http-limits.md)
    max_header_bytes: int = Field(16384, ge=1024, le=1 << 20)  # request line + headers
    header_timeout_s: float = Field(10.0, gt=0)  # connection open / first byte of a request -> headers complete
    body_timeout_s: float = Field(30.0, gt=0)  # headers complete -> body complete
    keep_alive_timeout_s: float = Field(30.0, gt=0)  # idle between requests
    send_timeout_s: float = Field(30.0, gt=0)  # a client that takes none of the response for this long is dropped
    max_response_buffer_bytes: int = Field(1 << 20, ge=65536)  # response bytes kgserve holds for one slow client
    workers: int = Field(1, ge=1, le=64)  # front-end processes on the port, each with its share of the engines
    # proxies (addresses or CIDR networks) whose X-Forwarded-For names the client (kgserve.admission.proxies);
    # empty: every client is its TCP peer's address, the header is ignored
    trusted_proxies: list[str] = []

    @field_validator("auth_token_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        return env_name(value)

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        return host_value(value)

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        networks = []
        for entry in value:
            try:
                networks.append(str(ipaddress.ip_network(entry.strip())))
            except ValueError as exc:
                raise ValueError(f"{entry!r} is not an IP address or CIDR network ({exc})") from None
        return networks


class BackendSettings(_Strict):
    # argv prefix; "{python}" stands for the running interpreter. Subcommand and flags are appended.
    command: list[str] = Field(min_length=1)
    model: Path | None = None  # overrides engine.model for this backend
    startup_timeout_s: float = Field(300.0, gt=0)


class EngineSettings(_Strict):
    backend: str = "cuda"
    cfg: Path = Path("katago_serving.cfg")
    model: Path = Path("models/model.bin.gz")
    home_data_dir: Path = Path("katago_home")
    processes: int = Field(1, ge=1, le=64)
    min_ready: int | None = Field(None, ge=1)
    restart_backoff_initial_s: float = Field(0.5, gt=0)
    restart_backoff_max_s: float = Field(30.0, gt=0)
    stderr_tail_lines: int = Field(50, ge=1, le=10000)
    liveness_interval_s: float = Field(5.0, gt=0)  # how often a ready engine is asked query_version
    # ...and at once when it has queries pending and has written nothing for this long
    silent_probe_s: float = Field(1.0, gt=0)
    probe_late_s: float = Field(2.0, gt=0)  # an answer later than this: frozen, no new query until it answers
    liveness_timeout_s: float = Field(30.0, gt=0)  # no answer in this long: the engine is killed and restarted
    # a synthetic net (random weights, `python -m kgbench.nets synth`) is served only when this says the run is a
    # throughput test: its analyses are noise (kgserve.katago.netfile); /readyz then says so
    throughput_test: bool = False
    # cfg keys kgserve's start-up check lets through although KataGo v1.17.2 does not read them: keys of a newer
    # KataGo the engine binary reads (docs/cfg.md). Any other unknown key, or a value KataGo would refuse, stops
    # kgserve at start (kgserve.katago.cfgcheck)
    allow_unknown_cfg_keys: list[str] = Field(default_factory=list)
    # an engine that refuses to start the same way on consecutive starts (same exit, same stderr error, before
    # ready) ends kgserve (exit 3) unless this keeps it up, unready, for a supervisor that restarts it
    stay_up_on_engine_refusal: bool = False
    # the last share of each engine's numAnalysisThreads goes only to clients holding few of its threads (KataGo never
    # preempts a search: one client's long queries would otherwise hold every thread); a busy client's further
    # queries wait in kgserve (kgserve.engine.dispatch, docs/http-limits.md). 0: off, every query written at once
    thread_reserve: float = Field(0.0625, ge=0, lt=1)
    # while no other client waits, a busy client borrows the reserve as long as a newcomer would wait at most this
    # many seconds for a thread (a search that short itself, or another running search ending that soon). 0: never
    lend_bound_s: float = Field(2.0, ge=0)
    backends: dict[str, BackendSettings]
    # which promoted cfg this config belongs with (kgbench.promote writes both; kgserve.servedcfg checks them at
    # start): the run the cfg came from and the sha256 of the cfg file. None: a hand-made runtime, not checked. They
    # belong to this file's engine.cfg only: a config derived with another cfg (a job's, a benchmark's) drops them
    # (left out of model_dump, cleared by model_copy with another cfg)
    cfg_run_id: str | None = Field(None, exclude=True)
    cfg_sha256: str | None = Field(None, pattern=_SHA256_RE.pattern, exclude=True)

    @field_validator("backends")
    @classmethod
    def _known_backends(cls, value: dict[str, BackendSettings]) -> dict[str, BackendSettings]:
        _check_backend_keys(value)
        return value

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; one with another cfg and no tie of its own is tied to nothing (see cfg_sha256)."""
        if update and "cfg" in update and "cfg_sha256" not in update:
            update = {**update, "cfg_run_id": None, "cfg_sha256": None}
        return super().model_copy(update=update, deep=deep)

    def backend_settings(self, name: str | None = None) -> BackendSettings:
        name = name or self.backend
        if name not in self.backends:
            raise ConfigError(
                f"backend {name!r} is not configured under engine.backends (have: {sorted(self.backends)})"
            )
        return self.backends[name]

    def model_for(self, name: str | None = None) -> Path:
        return self.backend_settings(name).model or self.model

    def argv_prefix(self, name: str | None = None) -> list[str]:
        return [sys.executable if part == "{python}" else part for part in self.backend_settings(name).command]

    @property
    def required_ready(self) -> int:
        return min(self.min_ready or self.processes, self.processes)


class LimitsSettings(_Strict):
    max_inflight_queries: int = Field(512, ge=1)
    max_body_bytes: int = Field(1 << 20, ge=1)
    deadline_s: float = Field(300.0, gt=0)
    max_visits: int = Field(100_000, ge=1)
    visits_over_cap: Literal["reject", "clamp"] = "reject"
    max_queries_per_request: int = Field(256, ge=1)
    max_turns_per_query: int = Field(1000, ge=1)
    terminate_grace_s: float = Field(2.0, gt=0)  # after a deadline: how long to wait for KataGo's last lines
    # a query asking for partial results more often is refused with KataGo's own error for the field
    min_report_interval_s: float = Field(0.1, ge=0.001, le=1e6)
    # per client (address, and token where auth is on; connections: per address): docs/http-limits.md
    max_inflight_per_client: int = Field(512, ge=1)  # over it while others have some: held, then 429 / an error line
    # how long an HTTP request past max_inflight_per_client (while others contend) waits in kgserve for room before
    # its 429 (kgserve.admission.holding); 0: refused at once
    hold_past_share_s: float = Field(30.0, ge=0)
    # HTTP and WebSocket; engaged only in the last 1/8 of max_connections (kept for newcomers): there, a new connection
    # from an address holding this many gets 429 and is closed (kgserve.admission.clients)
    max_connections_per_client: int = Field(64, ge=1)
    max_connections: int = Field(0, ge=0)  # open connections, all clients; 0: from RLIMIT_NOFILE (less 1/16, >= 64)
    max_partial_bytes_per_s: int = Field(4 << 20, ge=0)  # partial lines past this rate are not sent (0: no cap)
    # lines (queries, actions, anything) a client may send a second over all its WebSockets, a second's worth of
    # burst; past it its messages wait in its own sockets (kgserve.admission.rates; 0: no bound)
    max_messages_per_s_per_client: int = Field(2000, ge=0)
    # HTTP requests a client may make a second over all its connections, a second's worth of burst; past it a
    # request waits its turn before it is handled (kgserve.http.pacing; 0: no bound)
    max_requests_per_s_per_client: int = Field(1000, ge=0)
    # bytes held for work in flight (kgserve.admission.budget): over it, 429 / an error line / a slow client dropped;
    # the budget's last 1/8 is kept for clients holding little (its reserve: a fraction, no key of its own)
    memory_budget_bytes: int = Field(256 << 20, ge=1 << 20)
    memory_per_client_bytes: int = Field(64 << 20, ge=1 << 20)


class WebSocketSettings(_Strict):
    """The KataGo-protocol WebSocket endpoint (kgserve.ws.websocket)."""

    enabled: bool = True
    path: str = Field("/ws", pattern=r"^/[A-Za-z0-9_./-]*$")
    max_inflight_per_connection: int = Field(64, ge=1)  # over it: an error line per refused query
    send_buffer_bytes: int = Field(8 << 20, ge=1024)  # a client that lets more pile up is cut off
    # lines one connection may send a second, a second's worth of burst; past it: one error line a second and its
    # further messages read at that rate (kgserve.admission.rates; 0: no bound)
    max_messages_per_s: int = Field(1000, ge=0)


class PrioritySettings(_Strict):
    """Priority classes (kgserve.admission.priority): interactive queries run before batch ones in KataGo's queue."""

    classes: bool = True  # false: callers' `priority` goes to KataGo unchanged, class requests are ignored
    http_default: Literal["interactive", "batch"] = "batch"
    websocket_default: Literal["interactive", "batch"] = "interactive"
    # interactive queries one client may have in flight; more of its queries run as batch (0: no interactive
    # without the credential)...
    interactive_share: int = Field(16, ge=0)
    # ...unless it presents one of the tokens in this environment variable (comma-separated; null: none)
    interactive_token_env: str | None = None
    # inside its class, a query steps down one level per query its client already has in flight there, so the
    # engine starts every client's first query before anyone's second (false: callers' priorities alone). Off by
    # default: with it a client's own later query no longer overtakes its own backlog (KaTrain's node in view),
    # which a one-person or KaTrain server needs; turn it on for a server shared by many batch clients
    fairness: bool = False

    @field_validator("interactive_token_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        return env_name(value)


class ReleaseNetwork(_Strict):
    name: str  # file name under runtime/models/
    url: str
    sha256: str | None = None  # null: runtime/fetch_katago.sh records it after the first download
    size_bytes: int | None = Field(None, ge=1)  # published size, a cheap sanity check before hashing

    @field_validator("name")
    @classmethod
    def _file_name(cls, value: str) -> str:
        return file_name(value)  # fetch_katago.sh writes runtime/models/<name>: never a path out of it


class ReleaseSettings(_Strict):
    """The pinned KataGo release (one version for every backend) and the pinned network."""

    version: str
    assets: dict[str, str]  # backend -> Linux x64 zip asset name of `version`
    url_base: str  # <url_base>/<version>/<asset>
    sha256: dict[str, str | None] = {}  # backend -> sha256 of the zip (null: recorded on first download)
    network: ReleaseNetwork
    # other networks runtime/fetch_katago.sh fetches by name (`network:NAME`), e.g. the previous pin: never served
    # unless engine.model names their file
    alternatives: dict[str, ReleaseNetwork] = {}

    @field_validator("assets")
    @classmethod
    def _asset_backends(cls, value: dict[str, str]) -> dict[str, str]:
        _check_backend_keys(value)
        for name in value.values():
            file_name(name)  # fetch_katago.sh writes runtime/bin/<backend>/<asset>
        return value

    def asset_url(self, backend: str) -> str:
        return f"{self.url_base.rstrip('/')}/{self.version}/{self.assets[backend]}"


class SweepNodeSettings(_Strict):
    """PBS jobs of a sweep spread over GPU nodes (`python -m kgbench -m hydra/launcher=pbs ...`): each job one
    dask worker running one kgbench job at a time, with cluster.gpus/cpus/memory/queue."""

    max_nodes: int = Field(4, ge=1)  # PBS jobs (GPU nodes) the sweep holds at once
    walltime: str = "04:00:00"  # of each worker job; a job cut by it is a FAILED run, the sweep goes on
    # shell lines run in each PBS job before the worker starts (e.g. `module load cuda`, activating a venv)
    prologue: list[str] = []
    python: str | None = None  # the worker's Python (null: the interpreter that submits the sweep)
    interface: str | None = None  # network interface the scheduler and workers use (e.g. ib0; null: default)
    log_directory: str | None = None  # PBS stdout/stderr of the worker jobs (null: PBS's default)


class ClusterSettings(_Strict):
    """PBS resources and the enroot container (runtime/enroot_create.pbs, runtime/enroot_start.pbs)."""

    node: str = "hopper-34"
    queue: str | None = None
    gpus: int = Field(1, ge=1)
    cpus: int = Field(16, ge=1)
    memory: str = "128gb"
    walltime: str = "08:00:00"  # the interactive job (enroot_start.pbs)
    create_walltime: str = "02:00:00"  # the image build job (enroot_create.pbs)
    interactive_command: bool = True  # qsub -I ... -- <script>; false: plain qsub -I, run the script inside
    tmux_session: str = "go"
    base_image: str
    container_name: str = "kgbench"
    image_path: Path = Path("kgbench.sqsh")
    venv: str = "/opt/kgbench-venv"  # Python environment inside the image (the project is installed editable)
    apt_packages: list[str] = []
    sweep: SweepNodeSettings = Field(default_factory=SweepNodeSettings)


class BalancerBackend(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(ge=1, le=65535)
    gpu: str | None = None  # CUDA_VISIBLE_DEVICES of the kgserve on this port (one kgserve per GPU of a node)


class BalancerSettings(_Strict):
    """HAProxy in front of several kgserve (`python -m kgserve.haproxy` writes its cfg): one address for
    several GPUs or nodes; `balance leastconn`, a backend leaves the rotation when its /readyz fails."""

    host: str = "127.0.0.1"  # where HAProxy listens
    port: int = Field(9000, ge=1, le=65535)
    check_interval_s: float = Field(1.0, gt=0)  # /readyz probe period of each backend
    fall: int = Field(2, ge=1)  # failed probes before a backend leaves the rotation
    rise: int = Field(2, ge=1)  # passed probes before it comes back
    error_limit: int = Field(2, ge=1)  # failures in a row on live traffic that take a backend out at once
    connect_timeout_s: float = Field(5.0, gt=0)
    tunnel_timeout_s: float = Field(3600.0, gt=0)  # an idle WebSocket (or other upgraded) connection
    maxconn: int = Field(4096, ge=1)
    backends: list[BalancerBackend] = Field(min_length=1)


class Settings(_Strict):
    server: ServerSettings
    engine: EngineSettings
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    websocket: WebSocketSettings = Field(default_factory=WebSocketSettings)
    priority: PrioritySettings = Field(default_factory=PrioritySettings)
    release: ReleaseSettings | None = None
    cluster: ClusterSettings | None = None
    balancer: BalancerSettings | None = None
    source: Path | None = Field(None, exclude=True)  # the file these settings came from

    def with_overrides(
        self,
        *,
        backend: str | None = None,
        port: int | None = None,
        host: str | None = None,
        throughput_test: bool | None = None,
        model: str | None = None,
        allow_unknown_cfg_keys: list[str] | None = None,
        stay_up_on_engine_refusal: bool | None = None,
    ) -> Settings:
        """A copy with command-line choices applied; `model` (a path or `katrain`) replaces the served backend's
        model, wherever the config set it."""
        engine = self.engine
        if backend is not None:
            engine.backend_settings(backend)  # fails clearly if not configured
            engine = engine.model_copy(update={"backend": backend})
        if throughput_test is not None:
            engine = engine.model_copy(update={"throughput_test": throughput_test})
        if allow_unknown_cfg_keys:
            keys = [*engine.allow_unknown_cfg_keys, *allow_unknown_cfg_keys]
            engine = engine.model_copy(update={"allow_unknown_cfg_keys": keys})
        if stay_up_on_engine_refusal is not None:
            engine = engine.model_copy(update={"stay_up_on_engine_refusal": stay_up_on_engine_refusal})
        if model is not None:
            path = _resolve_model(model, Path.cwd(), "--model")
            backends = {
                name: b.model_copy(update={"model": None}) if name == engine.backend else b
                for name, b in engine.backends.items()
            }
            engine = engine.model_copy(update={"model": path, "backends": backends})
        server = self.server.model_copy(update={k: v for k, v in {"port": port, "host": host}.items() if v is not None})
        return self.model_copy(update={"engine": engine, "server": server})


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_PATH_FIELDS = ("cfg", "model", "home_data_dir")


def _resolve_model(value: Any, base: Path, key: str) -> Any:
    """A model file, or `katrain`: the net inside the installed katrain package (ConfigError naming the extra)."""
    if str(value).strip() != KATRAIN_NET:
        return _resolve(value, base)
    try:
        return katrain_model_path()
    except KatrainNetMissing as exc:
        raise ConfigError(f"{key}: katrain: {exc}") from None


def _resolve(value: Any, base: Path) -> Any:
    if value is None:
        return None
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else (base / path).resolve()


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    def resolve(value: Any) -> Any:
        return _resolve(value, base)

    engine = raw.get("engine")
    if not isinstance(engine, dict):
        return
    for key in _PATH_FIELDS:
        if key in engine:
            engine[key] = _resolve_model(engine[key], base, "engine.model") if key == "model" else resolve(engine[key])
    for name, backend in (engine.get("backends") or {}).items():
        if not isinstance(backend, dict):
            continue
        if backend.get("model") is not None:
            backend["model"] = _resolve_model(backend["model"], base, f"engine.backends.{name}.model")
        command = backend.get("command")
        if isinstance(command, list) and command and isinstance(command[0], str):
            first = command[0]
            # a bare program name ("katago") is looked up on PATH; anything with a slash is a path
            if "/" in first and not Path(first).is_absolute():
                command[0] = str((base / first).resolve())
    cluster = raw.get("cluster")
    if isinstance(cluster, dict) and cluster.get("image_path") is not None:
        cluster["image_path"] = resolve(cluster["image_path"])


def _format_validation_error(error: ValidationError, path: Path) -> str:
    lines = [f"invalid configuration in {path}:"]
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"]) or "(top level)"
        if item["type"] == "extra_forbidden":
            lines.append(f"  {key}: unknown key")
        else:
            lines.append(f"  {key}: {item['msg']} (got {item.get('input')!r})")
    return "\n".join(lines)


def load_settings(path: str | Path | None = None) -> Settings:
    config_path = Path(path) if path is not None else DEFAULT_CONFIG_PATH
    try:
        text = config_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {config_path}: {exc.strerror or exc}") from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{config_path} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{config_path} must hold a mapping at the top level")
    _resolve_paths(raw, config_path.resolve().parent)
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, config_path)) from None
    try:
        settings.engine.backend_settings()
    except ConfigError as exc:
        raise ConfigError(f"{config_path}: engine.backend: {exc}") from None
    return settings.model_copy(update={"source": config_path.resolve()})
