"""Values of runtime/config.yaml for the shell scripts in runtime/ (read once, never copied into a script).

    python -m kgserve.runtime_config [--config PATH] get cluster.node      # one value
    python -m kgserve.runtime_config [--config PATH] env                   # shell-quoted KG_*=VALUE lines
    python -m kgserve.runtime_config [--config PATH] pin release.sha256.cuda HEX   # record a checksum
    (pinnable: release.sha256.<backend>, release.network.sha256, release.alternatives.<name>.sha256)

`get` prints a scalar as is (null as an empty line) and lists/mappings as JSON. Paths come out absolute
(resolved against the config file's folder, like kgserve does). `env` lines are meant for
`eval "$(python -m kgserve.runtime_config env)"`. `pin` rewrites one checksum in the file, keeping comments.
Exit code 2 with one message on stderr for a bad file or an unknown key.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from kgserve.atomicfile import write_text_atomic
from kgserve.paths import PROJECT_ROOT
from kgserve.settings import DEFAULT_CONFIG_PATH, ConfigError, Settings, load_settings

__all__ = ["env_lines", "flatten", "get_value", "main", "pin_sha256"]

_SHA256 = re.compile(r"[0-9a-f]{64}")


def flatten(settings: Settings) -> dict[str, Any]:
    """Dotted key -> value for every setting, plus derived values the scripts need."""
    data = settings.model_dump(mode="json", exclude={"source"})
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value and prefix not in ("", "engine.backends"):
            flat[prefix] = value
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item)
        else:
            flat[prefix] = value

    walk("", data)
    config_path = settings.source or DEFAULT_CONFIG_PATH.resolve()
    flat["paths.config"] = str(config_path)
    flat["paths.runtime_dir"] = str(config_path.parent)
    flat["paths.repo"] = str(PROJECT_ROOT)
    flat["paths.bin_dir"] = str(config_path.parent / "bin")
    flat["paths.models_dir"] = str(config_path.parent / "models")
    flat["paths.logs_dir"] = str(config_path.parent / "logs")
    if settings.release is not None:
        for backend in settings.release.assets:
            flat[f"release.url.{backend}"] = settings.release.asset_url(backend)
        flat["release.network.path"] = str(config_path.parent / "models" / settings.release.network.name)
        for key, network in settings.release.alternatives.items():
            flat[f"release.alternatives.{key}.path"] = str(config_path.parent / "models" / network.name)
    return flat


def get_value(settings: Settings, key: str) -> str:
    flat = flatten(settings)
    if key not in flat:
        close = sorted(k for k in flat if k.startswith(key.split(".")[0]))
        raise ConfigError(f"no key {key!r} in {settings.source}" + (f" (have: {', '.join(close)})" if close else ""))
    return _text(flat[key])


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def env_lines(settings: Settings) -> list[str]:
    """`KG_SECTION_KEY='value'` for every scalar and list setting (lists space-separated)."""
    lines = []
    for key, value in flatten(settings).items():
        # mappings, and lists of them (balancer.backends), have no shell form: `get` prints them as JSON
        if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(i, dict) for i in value)):
            continue
        name = "KG_" + re.sub(r"[^A-Za-z0-9]+", "_", key).upper()
        text = " ".join(str(item) for item in value) if isinstance(value, list) else _text(value)
        lines.append(f"{name}={shlex.quote(text)}")
    return lines


def pin_sha256(config_path: Path, key: str, digest: str) -> None:
    """Write a sha256 into release.sha256.<backend>, release.network.sha256 or release.alternatives.<name>.sha256,
    keeping the file's comments."""
    from ruamel.yaml import YAML

    digest = digest.strip().lower()
    if not _SHA256.fullmatch(digest):
        raise ConfigError(f"not a sha256 hex digest: {digest!r}")
    parts = key.split(".")
    pinnable = (
        (parts[:2] == ["release", "sha256"] and len(parts) == 3)
        or parts == ["release", "network", "sha256"]
        or (parts[:2] == ["release", "alternatives"] and len(parts) == 4 and parts[3] == "sha256")
    )
    if not pinnable:
        raise ConfigError(
            "only release.sha256.<backend>, release.network.sha256 and release.alternatives.<name>.sha256 "
            f"can be pinned, not {key!r}"
        )
    text = config_path.read_text(encoding="utf-8")
    node = YAML().load(text)
    for part in parts[:-1]:
        if not isinstance(node, dict) or node.get(part) is None:
            raise ConfigError(f"{config_path}: no section {'.'.join(parts[:-1])!r}")
        node = node[part]
    if parts[-1] not in node:
        raise ConfigError(f"{config_path}: no key {key!r}")
    # edit the one line in place: comments, nulls and layout elsewhere stay byte-identical
    line_no = node.lc.key(parts[-1])[0]
    lines = text.splitlines(keepends=True)
    pattern = re.compile(rf"^(\s*{re.escape(parts[-1])}:[ \t]*)([^#\n]*?)([ \t]*(#.*)?)(\r?\n?)$")
    match = pattern.match(lines[line_no])
    if match is None:
        raise ConfigError(f"{config_path}:{line_no + 1}: cannot edit {key!r} in place")
    # quoted: an all-digit (or "1e5"-like) digest must stay a string in YAML
    lines[line_no] = f'{match.group(1)}"{digest}"{match.group(3)}{match.group(5)}'
    _replace_checked(config_path, "".join(lines))


def _replace_checked(config_path: Path, text: str) -> None:
    """Replace the config with `text` once a copy beside it loads (relative paths resolve in the same folder): a full
    disk or a crash leaves the old file whole, never a truncated one."""
    try:
        write_text_atomic(config_path, text, check=load_settings)
    except OSError as exc:
        raise ConfigError(f"cannot rewrite {config_path}: {exc.strerror or exc}; it is unchanged") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgserve.runtime_config", description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=None, help="default: runtime/config.yaml")
    sub = parser.add_subparsers(dest="command", required=True)
    get = sub.add_parser("get", help="print one value")
    get.add_argument("key")
    sub.add_parser("env", help="print shell-quoted KG_*=VALUE lines")
    pin = sub.add_parser("pin", help="record a sha256 in the config file")
    pin.add_argument("key")
    pin.add_argument("digest")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
        if args.command == "get":
            print(get_value(settings, args.key))
        elif args.command == "env":
            print("\n".join(env_lines(settings)))
        else:
            pin_sha256(settings.source or DEFAULT_CONFIG_PATH, args.key, args.digest)
    except ConfigError as exc:
        print(f"runtime_config: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
