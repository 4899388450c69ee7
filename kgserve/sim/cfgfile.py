"""The simulated engine's cfg: typed getters with KataGo's errors (the cfg format and keys: kgserve.katago.cfg)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kgserve.katago.cfg import ALIASES, CfgParseError, is_known_key
from kgserve.katago.cfg import parse_cfg_text as _parse

__all__ = ["CfgError", "SimCfg", "load_cfg", "parse_cfg_text"]


class CfgError(Exception):
    """A cfg problem KataGo reports by throwing (the message is KataGo's `what()` text)."""

    def __init__(self, message: str, kind: str = "IOError") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def parse_cfg_text(text: str) -> dict[str, str]:
    try:
        return _parse(text)
    except CfgParseError as exc:
        raise CfgError(f"Could not parse line in config: {exc}") from None


@dataclass
class SimCfg:
    file_name: str
    values: dict[str, str]
    used: set[str] = field(default_factory=set)

    def apply_aliases(self) -> None:
        for alias, name in ALIASES.items():
            if alias in self.values and name not in self.values:
                self.values[name] = self.values.pop(alias)

    def contains(self, key: str) -> bool:
        return key in self.values

    def get_int(self, key: str, default: int, lo: int, hi: int) -> int:
        if key not in self.values:
            return default
        raw = self.values[key]
        try:
            value = int(raw)
        except ValueError:
            raise CfgError(f"Could not parse '{raw}' as int for key '{key}' in config file {self.file_name}") from None
        if value < lo or value > hi:
            raise CfgError(f"Key '{key}' must be in the range {lo} to {hi} in config file {self.file_name}")
        return value

    def require_int(self, key: str, lo: int, hi: int) -> int:
        if key not in self.values:
            raise CfgError(f"Could not find key '{key}' in config file {self.file_name}")
        return self.get_int(key, 0, lo, hi)

    def unused_keys(self) -> list[str]:
        return sorted(key for key in self.values if not is_known_key(key))

    def echo(self) -> str:
        return "".join(f"{key} = {self.values[key]}\n" for key in sorted(self.values))


def load_cfg(path: str) -> SimCfg:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        raise CfgError(f"Could not open config file: {path}") from None
    return SimCfg(path, parse_cfg_text(text))
