"""`python -m kgserve ...` as a real subprocess for the end-to-end tests: started, waited for, stopped."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["get", "kgserve"]


def get(url: str, timeout: float = 10) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@contextlib.contextmanager
def kgserve(argv: list[str], env: dict[str, str], cwd: Path) -> Iterator[tuple[str, dict[str, Any], list[str]]]:
    """Run `argv` (a kgserve command line on a free port): yields (base url, /readyz JSON once ready, log
    lines); SIGTERM and wait on the way out (kill after 60 s)."""
    server = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    url: list[str] = []
    found = threading.Event()

    def pump() -> None:
        assert server.stdout is not None
        for line in server.stdout:
            lines.append(line)
            if not url and (m := re.search(r"kgserve listening on (http://\S+)", line)):
                url.append(m.group(1))
                found.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        assert found.wait(120), "kgserve did not log its address:\n" + "".join(lines)
        base = url[0]
        deadline = time.monotonic() + 120
        status, body = get(base + "/readyz")
        while status != 200 and time.monotonic() < deadline:
            time.sleep(0.5)
            status, body = get(base + "/readyz")
        assert status == 200, body
        yield base, json.loads(body), lines
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        reader.join(timeout=10)
        if server.stdout is not None:
            server.stdout.close()
