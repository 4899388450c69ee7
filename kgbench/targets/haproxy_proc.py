"""A real `haproxy` process in front of several kgserve (cfg from kgserve.haproxy), with its admin stats socket
read for each backend's state (UP, DOWN, ...) and how many requests it was sent."""

from __future__ import annotations

import contextlib
import csv
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kgserve.haproxy import render_cfg
from kgserve.settings import BalancerBackend, BalancerSettings, Settings

__all__ = ["BackendStat", "HAProxyProcess", "haproxy_binary", "with_balancer"]


def haproxy_binary() -> str | None:
    """The haproxy program on PATH (or the Debian package's /usr/sbin/haproxy), None when absent."""
    return shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")


def with_balancer(settings: Settings, port: int, backends: list[tuple[str, int]], **fields: float) -> Settings:
    """`settings` with a balancer: section on 127.0.0.1:`port` over these (host, port) kgserve backends."""
    base = settings.balancer or BalancerSettings(backends=[BalancerBackend(port=1)])
    update = {"host": "127.0.0.1", "port": port, "backends": [BalancerBackend(host=h, port=p) for h, p in backends]}
    return settings.model_copy(update={"balancer": base.model_copy(update={**update, **fields})})


@dataclass(frozen=True)
class BackendStat:
    name: str
    status: str  # UP, DOWN, "UP 1/2" (going down), "DOWN 1/2" (coming back), MAINT, no check
    sessions: int  # connections HAProxy sent it (stot), retries included


class HAProxyProcess:
    """`haproxy -db -f CFG` (foreground), stats socket next to the cfg; stopped in `stop()`."""

    def __init__(self, settings: Settings, workdir: Path) -> None:
        binary = haproxy_binary()
        if binary is None:
            raise FileNotFoundError("haproxy is not installed (Debian: apt-get install haproxy)")
        assert settings.balancer is not None
        self.balancer = settings.balancer
        self.socket_path = workdir / "haproxy.sock"
        self.cfg_path = workdir / "haproxy.cfg"
        text = render_cfg(settings, stats_socket=self.socket_path, log_requests=True)
        self.cfg_path.write_text(text, encoding="utf-8")
        self.argv = [binary, "-db", "-f", str(self.cfg_path)]
        self.log_path = workdir / "haproxy.log"
        self.url = f"http://{self.balancer.host}:{self.balancer.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: TextIO | None = None

    def start(self, timeout_s: float = 30.0) -> None:
        self._log = self.log_path.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while not self.socket_path.exists() or not self._answers():
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited ({self.proc.returncode}): {self.log_path.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"haproxy did not start within {timeout_s:g} s")
            time.sleep(0.1)

    def _answers(self) -> bool:
        try:
            self.command("show info")
        except OSError:
            return False
        return True

    def command(self, line: str, timeout_s: float = 5.0) -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(self.socket_path))
            sock.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")

    def backend_stats(self) -> dict[str, BackendStat]:
        """Each server of backend `kgserve`, by name (kgserve0, kgserve1, ...)."""
        text = self.command("show stat").lstrip("# ")
        stats = {}
        for row in csv.DictReader(text.splitlines()):
            if row.get("pxname") == "kgserve" and row.get("svname") not in ("FRONTEND", "BACKEND"):
                stats[row["svname"]] = BackendStat(row["svname"], row.get("status", ""), int(row.get("stot") or 0))
        return stats

    def wait_status(self, name: str, status: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            stat = self.backend_stats().get(name)
            if stat is not None and stat.status == status:
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        """Hard stop (SIGTERM: close every connection now), then kill after 5 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self._log is not None:
            self._log.close()
        with contextlib.suppress(OSError):
            self.socket_path.unlink()
