"""The promote header: rendering, reading back, and detecting a hand-edited cfg."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kgserve.provenance import HEADER_PREFIX, parse_provenance, read_provenance, render_header

BODY = "# KataGo analysis cfg\nnumSearchThreads = 8\nnnMaxBatchSize = 64\n"
FIELDS = {
    "run_id": "abc123",
    "sweep_id": "sweep-1",
    "backend": "trt",
    "req_per_s": "12.5",
    "p99_ms": "840.0",
    "simulated": "false",
}


def test_render_header_lines_and_hash() -> None:
    text = render_header(FIELDS, BODY)
    header = text[: len(text) - len(BODY)]
    assert text.endswith(BODY)
    lines = header.splitlines()
    assert all(line.startswith(HEADER_PREFIX) for line in lines)
    assert lines[0] == "# kgbench-promote: run_id = abc123"
    digest = hashlib.sha256(BODY.encode()).hexdigest()
    assert lines[-1] == f"# kgbench-promote: content_sha256 = {digest}"


def test_values_flattened_and_bad_key_rejected() -> None:
    text = render_header({"model": "a\nb"}, BODY)
    assert "# kgbench-promote: model = a b\n" in text
    with pytest.raises(ValueError):
        render_header({"bad key": "x"}, BODY)


def test_read_back_unmodified(tmp_path: Path) -> None:
    cfg = tmp_path / "katago_serving.cfg"
    cfg.write_text(render_header(FIELDS, BODY))
    prov = read_provenance(cfg)
    assert prov is not None
    assert not prov.modified
    assert prov.run_id == "abc123"
    assert prov.backend == "trt"
    assert prov.simulated is False
    assert prov.warning() is None
    data = prov.as_dict()
    assert data["sweep_id"] == "sweep-1"
    assert data["modified"] is False
    assert data["cfg"] == str(cfg)


def test_hand_edit_detected(tmp_path: Path) -> None:
    cfg = tmp_path / "katago_serving.cfg"
    cfg.write_text(render_header(FIELDS, BODY).replace("nnMaxBatchSize = 64", "nnMaxBatchSize = 32"))
    prov = read_provenance(cfg)
    assert prov is not None
    assert prov.modified
    assert prov.as_dict()["modified"] is True
    warning = prov.warning()
    assert warning is not None and "edited after promotion" in warning


def test_simulated_flag() -> None:
    prov = parse_provenance(render_header({**FIELDS, "simulated": "true"}, BODY))
    assert prov is not None and prov.simulated
    assert "SIMULATED" in prov.summary()


def test_no_header_or_missing_file(tmp_path: Path) -> None:
    cfg = tmp_path / "plain.cfg"
    cfg.write_text(BODY)
    assert read_provenance(cfg) is None
    assert read_provenance(tmp_path / "missing.cfg") is None
