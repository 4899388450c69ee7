"""One stub for qsub, enroot, tmux, nvidia-smi, curl, wget and hostname (symlinked under those names).

Every call appends {"cmd", "args", "env"} as a JSON line to $STUB_LOG. curl/wget copy files from $STUB_MIRROR
(by the URL's basename) or fail like an offline machine when $STUB_OFFLINE is set (a loopback URL answers
$STUB_HTTP_CODE, /readyz with $STUB_READYZ); `enroot list` prints
$STUB_ENROOT_LIST (comma-separated); `enroot import/export --output X` create X.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

ENV_KEYS = ("KG_REPO", "KG_CONFIG", "PBS_JOBID", "KG_SUBMITTED")


def _option(args: list[str], *names: str) -> str | None:
    for index, arg in enumerate(args):
        if arg in names and index + 1 < len(args):
            return args[index + 1]
    return None


def _local_http(url: str, args: list[str], out: str | None) -> int:
    """A server 'already answering' on a loopback port: every request gets $STUB_HTTP_CODE."""
    code = os.environ["STUB_HTTP_CODE"]
    path = "/" + url.split("/", 3)[3] if url.count("/") >= 3 else "/"
    readyz = os.environ.get("STUB_READYZ", '{"ready":true}')  # what the server says it serves
    body = '{"id":"stub","isDuringSearch":false,"turnNumber":0}\n' if path == "/analysis" else readyz
    if out and out != "/dev/null":
        Path(out).write_text(body)
    elif not out:
        sys.stdout.write(body)
    fmt = _option(args, "-w", "--write-out")
    if fmt:
        sys.stdout.write(fmt.replace("\\n", "\n").replace("%{http_code}", code))
    return 0


def _fetch(args: list[str], out_flags: tuple[str, ...], offline_code: int) -> int:
    url = next((a for a in args if a.startswith(("http://", "https://"))), None)
    out = _option(args, *out_flags)
    if url and url.startswith("http://127.0.0.1:") and os.environ.get("STUB_HTTP_CODE"):
        return _local_http(url, args, out)
    if os.environ.get("STUB_OFFLINE"):
        print("curl: (6) Could not resolve host: github.com", file=sys.stderr)
        return offline_code
    if url is None or out is None:
        return 2
    source = Path(os.environ.get("STUB_MIRROR", "/nonexistent")) / url.rsplit("/", 1)[-1]
    if not source.is_file():
        print(f"stub: 404 {url}", file=sys.stderr)
        return 22 if offline_code == 6 else 8
    data = source.read_bytes()
    resume = ("-C" in args or "-c" in args) and Path(out).is_file()
    if resume:  # like a server honouring Range: append what is missing
        with open(out, "ab") as handle:
            handle.write(data[Path(out).stat().st_size :])
    else:
        shutil.copyfile(source, out)
    return 0


def main() -> int:
    name = Path(sys.argv[0]).name
    args = sys.argv[1:]
    record = {"cmd": name, "args": args, "env": {k: os.environ.get(k) for k in ENV_KEYS}}
    with open(os.environ["STUB_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(record) + "\n")
    if name == "curl":
        return _fetch(args, ("-o", "--output"), 6)
    if name == "wget":
        return _fetch(args, ("-O",), 4)
    if name == "nvidia-smi":
        print("GPU 0: NVIDIA H200 (UUID: GPU-00000000-stub)")
    elif name == "hostname":
        print(os.environ.get("STUB_HOSTNAME", "hopper-34"))
    elif name == "enroot":
        sub = args[0] if args else ""
        if sub == "list":
            for item in filter(None, os.environ.get("STUB_ENROOT_LIST", "").split(",")):
                print(item)
        elif sub in ("import", "export"):
            out = _option(args, "--output", "-o")
            if out:
                Path(out).write_bytes(b"hsqs stub image\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
