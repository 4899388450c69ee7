"""runtime/fetch_katago.sh against a fake mirror: URLs from config.yaml, resume flags, extraction, sha256 pinning."""

from __future__ import annotations

import errno
import gzip
import hashlib
import subprocess
from pathlib import Path

import pytest

from kgserve.settings import ConfigError, Settings, load_settings

from .conftest import RUNTIME, Stubs

FETCH = str(RUNTIME / "fetch_katago.sh")


def test_downloads_pinned_assets_extracts_appimages_and_records_sha256(
    stubs: Stubs, config_copy: Path, shipped: Settings
) -> None:
    assert shipped.release is not None
    result = stubs.run([FETCH])
    assert result.returncode == 0, result.stderr
    urls = [next(a for a in call["args"] if a.startswith("https://")) for call in stubs.calls("curl")]
    assert urls == [shipped.release.asset_url("cuda"), shipped.release.asset_url("trt"), shipped.release.network.url]
    for call in stubs.calls("curl"):
        assert "-C" in call["args"] and "--progress-bar" in call["args"]  # resume and progress
    runtime = config_copy.parent
    for backend in ("cuda", "trt"):
        wrapper = runtime / "bin" / backend / "katago"
        assert (runtime / "bin" / backend / shipped.release.assets[backend]).is_file()
        assert (runtime / "bin" / backend / "squashfs-root" / "AppRun").is_file()

        out = subprocess.run([str(wrapper), "version"], capture_output=True, text=True, check=True, timeout=30)
        assert out.stdout.strip() == "KataGo fake AppRun: version"
    model = runtime / "models" / shipped.release.network.name
    assert model.is_file()
    pinned = load_settings(config_copy).release
    assert pinned is not None
    assert pinned.network.sha256 == hashlib.sha256(model.read_bytes()).hexdigest()
    assert (
        pinned.sha256["cuda"]
        == hashlib.sha256((runtime / "bin" / "cuda" / shipped.release.assets["cuda"]).read_bytes()).hexdigest()
    )
    assert "sha256 recorded" in result.stderr
    # every fetched network is described (python -m kgbench.nets flops): this fake one is said not to be a net
    assert f"could not describe {model}" in result.stderr or f"could not describe models/{model.name}" in result.stderr

    # second run: nothing downloaded again, everything verified against the recorded pins
    stubs.log.unlink()
    again = stubs.run([FETCH])
    assert again.returncode == 0, again.stderr
    assert stubs.calls("curl") == []
    assert again.stderr.count("sha256 ok") == 3


def test_a_file_that_does_not_match_its_pin_is_refused(stubs: Stubs, config_copy: Path, shipped: Settings) -> None:
    assert shipped.release is not None
    config_copy.write_text(config_copy.read_text().replace("    cuda: null", '    cuda: "' + "0" * 64 + '"'))
    result = stubs.run([FETCH, "cuda"])
    assert result.returncode == 1
    assert "sha256 mismatch" in result.stderr
    assert not (config_copy.parent / "bin" / "cuda" / "katago").exists()
    assert (config_copy.parent / "bin" / "cuda" / (shipped.release.assets["cuda"] + ".bad")).is_file()


def test_offline_gives_a_clear_message(stubs: Stubs, config_copy: Path) -> None:
    result = stubs.run([FETCH, "network"], extra_env={"STUB_OFFLINE": "1"})
    assert result.returncode == 1
    assert "looks offline" in result.stderr and "login node" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_target_is_refused(stubs: Stubs, config_copy: Path) -> None:
    result = stubs.run([FETCH, "opencl"])
    assert result.returncode == 1
    assert "unknown target 'opencl'" in result.stderr


def test_a_partial_download_resumes(stubs: Stubs, config_copy: Path, shipped: Settings) -> None:
    assert shipped.release is not None
    full = (stubs.mirror / shipped.release.network.name).read_bytes()
    models = config_copy.parent / "models"
    models.mkdir()
    part = models / (shipped.release.network.name + ".part")
    part.write_bytes(full[:50])
    result = stubs.run([FETCH, "network"])
    assert result.returncode == 0, result.stderr
    [call] = stubs.calls("curl")
    assert call["args"][call["args"].index("-C") + 1] == "-" and str(part) in call["args"]
    assert (models / shipped.release.network.name).read_bytes() == full
    assert not part.exists()


def test_wget_is_used_when_curl_is_missing(stubs: Stubs, config_copy: Path, tmp_path: Path) -> None:
    (stubs.bin_dir / "curl").unlink()
    system = tmp_path / "system-without-curl"  # every program on PATH except curl
    system.mkdir()
    for folder in stubs.env["PATH"].split(":")[1:]:
        for program in Path(folder).glob("*") if Path(folder).is_dir() else []:
            link = system / program.name
            if program.name != "curl" and not link.exists() and not link.is_symlink():
                link.symlink_to(program)
    result = stubs.run([FETCH, "network"], extra_env={"PATH": f"{stubs.bin_dir}:{system}"})
    assert result.returncode == 0, result.stderr
    [call] = stubs.calls("wget")
    assert "-c" in call["args"] and "--progress=bar:force" in call["args"]


def test_an_alternative_network_is_fetched_by_name_and_its_sha256_recorded(
    stubs: Stubs, config_copy: Path, shipped: Settings
) -> None:
    """`network:NAME` fetches release.alternatives.NAME (the previous pin) beside the pinned net, checks its size."""
    assert shipped.release is not None and "zhizi-b40c768nbt" in shipped.release.alternatives
    old = shipped.release.alternatives["zhizi-b40c768nbt"]
    data = gzip.compress(b"the previous pin, fake\n" * 3, mtime=0)
    (stubs.mirror / old.name).write_bytes(data)
    config_copy.write_text(config_copy.read_text().replace(f"size_bytes: {old.size_bytes}", f"size_bytes: {len(data)}"))
    result = stubs.run([FETCH, "network:zhizi-b40c768nbt"])
    assert result.returncode == 0, result.stderr
    [call] = stubs.calls("curl")
    assert old.url in call["args"]
    model = config_copy.parent / "models" / old.name
    assert model.read_bytes() == data and f"engine.model: models/{old.name}" in result.stderr
    pinned = load_settings(config_copy).release
    assert pinned is not None and pinned.network.sha256 is None  # the pinned net's entry untouched
    assert pinned.alternatives["zhizi-b40c768nbt"].sha256 == hashlib.sha256(data).hexdigest()

    unknown = stubs.run([FETCH, "network:b99"])
    assert unknown.returncode == 1
    assert "no network 'b99' under release.alternatives" in unknown.stderr and "zhizi-b40c768nbt" in unknown.stderr


def test_a_network_of_another_size_than_published_is_refused(
    stubs: Stubs, config_copy: Path, shipped: Settings
) -> None:
    assert shipped.release is not None
    name = shipped.release.network.name
    (stubs.mirror / name).write_bytes(b"truncated")
    result = stubs.run([FETCH, "network"])
    assert result.returncode == 1
    assert f"{name} has 9 bytes, the published size is" in result.stderr
    assert (config_copy.parent / "models" / (name + ".bad")).is_file()


def test_a_name_from_the_config_that_is_a_path_is_refused(stubs: Stubs, config_copy: Path, tmp_path: Path) -> None:
    """release.network.name `../../victim.txt` once overwrote a file outside runtime/models/ and pinned it."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    text = config_copy.read_text()
    assert load_settings(config_copy).release is not None
    name = load_settings(config_copy).release.network.name  # type: ignore[union-attr]
    config_copy.write_text(text.replace(f"name: {name}", "name: ../../victim.txt", 1))
    result = stubs.run([FETCH, "network"])
    assert result.returncode == 1
    assert "'../../victim.txt' is not a plain file name" in result.stderr
    assert victim.read_text() == "keep me\n" and not stubs.calls("curl")


def test_a_download_of_another_kind_is_refused_before_any_pin(
    stubs: Stubs, config_copy: Path, shipped: Settings
) -> None:
    """An asset URL answering an HTML page (a captive portal): refused, nothing pinned, the real file fetched later."""
    assert shipped.release is not None
    asset = shipped.release.assets["cuda"]
    real = (stubs.mirror / asset).read_bytes()
    (stubs.mirror / asset).write_bytes(b"<!DOCTYPE html><html>Please log in to the hotel wifi</html>\n")
    result = stubs.run([FETCH, "cuda"])
    assert result.returncode == 1
    assert f"{asset} is not a zip file" in result.stderr and "<!DOCTYPE html>" in result.stderr
    assert "nothing pinned" in result.stderr
    assert load_settings(config_copy).release.sha256.get("cuda") is None  # type: ignore[union-attr]
    (stubs.mirror / asset).write_bytes(real)
    again = stubs.run([FETCH, "cuda"])
    assert again.returncode == 0, again.stderr
    assert load_settings(config_copy).release.sha256["cuda"] == hashlib.sha256(real).hexdigest()  # type: ignore[union-attr]


def test_a_pin_that_cannot_be_written_leaves_the_config_whole(
    config_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite is a temporary file and a rename: a full disk while it pins changes nothing, where a truncated
    write once left invalid YAML."""
    import kgserve.atomicfile as atomicfile
    import kgserve.runtime_config as runtime_config

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    before = config_copy.read_bytes()
    monkeypatch.setattr(atomicfile.os, "fsync", full)  # the rewrite's one writer (kgserve.atomicfile)
    with pytest.raises(ConfigError, match="No space left on device; it is unchanged"):
        runtime_config.pin_sha256(config_copy, "release.network.sha256", "ab" * 32)
    assert config_copy.read_bytes() == before
    assert [p.name for p in config_copy.parent.iterdir()] == ["config.yaml"]
