"""The cfg kgserve serves: the one its config names, checked against that config, and kept for the whole run.

A runtime is two files, `config.yaml` and the `katago_serving.cfg` it names; `python -m kgbench.promote` writes both
from one run and ties them (engine.cfg_run_id, engine.cfg_sha256 in config.yaml). `check_pair` refuses a pair that
does not belong together (an interrupted promote, two at once, a hand edit), naming both. A config without the tie
(made by hand) is not checked.

`KeptCfg.take` copies the cfg, as checked, into a folder of kgserve's own (mode 0700) and every engine kgserve
starts or restarts runs that copy: a newer cfg promoted into the runtime behind a running kgserve's back is never
picked up by a restart (its admission, /readyz and its engines would otherwise disagree). Taking a new runtime is an
explicit act: restart kgserve (docs/integrity.md).

Standard library only: kgserve must never import mlflow.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kgserve.provenance import parse_provenance
from kgserve.settings import ConfigError, Settings

__all__ = ["KeptCfg", "check_pair", "pair_problem"]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pair_problem(settings: Settings, data: bytes) -> str | None:
    """Why the cfg bytes `data` are not the cfg `settings` was promoted with, naming both; None when they are (or
    when the config carries no tie)."""
    engine = settings.engine
    if engine.cfg_sha256 is None:
        return None
    actual = _sha256(data)
    if actual == engine.cfg_sha256:
        return None
    provenance = parse_provenance(data.decode("utf-8", errors="replace"))
    theirs = provenance.run_id if provenance is not None and provenance.run_id else "no promoted run"
    return (
        f"{settings.source or 'the config'} and {engine.cfg} do not belong together: the config was promoted with "
        f"the cfg of run {engine.cfg_run_id} (sha256 {engine.cfg_sha256[:12]}), the cfg there is of {theirs} "
        f"(sha256 {actual[:12]}). A promote was interrupted, two ran at once, or a file was edited: promote again "
        "(python -m kgbench.promote), or remove engine.cfg_run_id and engine.cfg_sha256 to serve a hand-made pair"
    )


def check_pair(settings: Settings) -> None:
    """ConfigError naming both files when the cfg is not the one the config was promoted with."""
    try:
        data = settings.engine.cfg.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the KataGo cfg {settings.engine.cfg}: {exc.strerror or exc}") from exc
    problem = pair_problem(settings, data)
    if problem:
        raise ConfigError(problem)


@dataclass(frozen=True)
class KeptCfg:
    """kgserve's own copy of the cfg it started with; `settings` name the copy as engine.cfg."""

    source: Path  # the cfg the config names
    path: Path  # the copy every engine runs
    sha256: str
    run_id: str | None  # the promoted run the cfg came from (its header), None for a hand-made cfg
    settings: Settings

    @classmethod
    def take(cls, settings: Settings) -> KeptCfg:
        """Read the cfg once, check it against the config, keep the bytes read. ConfigError when it is unreadable
        or not the config's."""
        source = settings.engine.cfg
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read the KataGo cfg {source}: {exc.strerror or exc}") from exc
        problem = pair_problem(settings, data)
        if problem:
            raise ConfigError(problem)
        folder = Path(tempfile.mkdtemp(prefix="kgserve-cfg-"))  # mode 0700: only this user may swap it
        path = folder / source.name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        provenance = parse_provenance(data.decode("utf-8", errors="replace"), str(source))
        engine = settings.engine.model_copy(update={"cfg": path})
        return cls(
            source=source,
            path=path,
            sha256=_sha256(data),
            run_id=provenance.run_id if provenance is not None else None,
            settings=settings.model_copy(update={"engine": engine}),
        )

    def remove(self) -> None:
        shutil.rmtree(self.path.parent, ignore_errors=True)

    def as_dict(self) -> dict[str, str | None]:
        """What /readyz says the engines run."""
        return {"cfg_sha256": self.sha256, "cfg_run_id": self.run_id, "cfg_kept": str(self.path)}
