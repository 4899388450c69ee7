"""runtime/config.yaml loading: the shipped file, overrides, and clear errors for bad files."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from kgserve.settings import DEFAULT_CONFIG_PATH, ConfigError, is_loopback, load_settings
from tests.conftest import REPO


def test_the_shipped_config_loads_with_port_9100_on_loopback() -> None:
    settings = load_settings()
    assert settings.server.port == 9100
    assert is_loopback(settings.server.host)
    assert settings.engine.cfg == REPO / "runtime" / "katago_serving.cfg"
    assert settings.source == DEFAULT_CONFIG_PATH.resolve()


def test_no_other_file_hard_codes_the_serving_port() -> None:
    offenders = []
    for path in [
        *REPO.glob("kgserve/**/*.py"),
        *REPO.glob("kgbench/**/*.py"),
        *REPO.glob("runtime/*.sh"),
        *REPO.glob("runtime/*.pbs"),
        *REPO.glob("conf/**/*.yaml"),
    ]:
        if re.search(r"(?<!\d)9100(?!\d)", path.read_text(encoding="utf-8", errors="replace")):
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_sim_backend_runs_this_python_and_its_own_model() -> None:
    settings = load_settings().with_overrides(backend="sim", port=0, host="127.0.0.1")
    assert settings.engine.backend == "sim"
    assert settings.server.port == 0
    assert settings.engine.argv_prefix()[:3] == [sys.executable, "-m", "kgserve.sim"]
    assert settings.engine.model_for().is_file()


def test_unknown_backend_override_is_refused() -> None:
    with pytest.raises(ConfigError, match="backend 'tpu' is not configured"):
        load_settings().with_overrides(backend="tpu")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8") + text, encoding="utf-8")
    return path


def test_unknown_key_names_the_key_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(DEFAULT_CONFIG_PATH.read_text().replace("  port: 9100", "  port: 9100\n  prot: 1"))
    with pytest.raises(ConfigError) as error:
        load_settings(path)
    assert "server.prot: unknown key" in str(error.value)
    assert str(path) in str(error.value)


def test_wrong_type_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(DEFAULT_CONFIG_PATH.read_text().replace("max_inflight_queries: 2048", "max_inflight_queries: lots"))
    with pytest.raises(ConfigError, match=r"limits\.max_inflight_queries"):
        load_settings(path)


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(DEFAULT_CONFIG_PATH.read_text())
    settings = load_settings(path)
    assert settings.engine.cfg == tmp_path / "katago_serving.cfg"
    assert Path(settings.engine.backends["cuda"].command[0]) == tmp_path / "bin" / "cuda" / "katago"


def test_missing_file_and_bad_yaml_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        load_settings(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("server: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(bad)


def test_trusted_proxies_are_checked_and_normalised(tmp_path: Path) -> None:
    assert load_settings().server.trusted_proxies == []  # shipped: the header is ignored
    good = DEFAULT_CONFIG_PATH.read_text().replace(
        "  trusted_proxies: []", '  trusted_proxies: [10.0.0.5, "10.1.0.0/16", "2001:DB8::/32"]'
    )
    (tmp_path / "good.yaml").write_text(good)
    proxies = load_settings(tmp_path / "good.yaml").server.trusted_proxies
    assert proxies == ["10.0.0.5/32", "10.1.0.0/16", "2001:db8::/32"]
    for wrong, says in (("10.0.0.0/33", "10.0.0.0/33"), ("10.0.0.5/24", "host bits set"), ("balancer", "balancer")):
        (tmp_path / "bad.yaml").write_text(good.replace("10.0.0.5,", f"{wrong!r},"))
        with pytest.raises(ConfigError, match=r"server\.trusted_proxies") as error:
            load_settings(tmp_path / "bad.yaml")
        assert "is not an IP address or CIDR network" in str(error.value) and says in str(error.value)
