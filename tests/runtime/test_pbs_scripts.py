"""runtime/enroot_create.pbs and runtime/enroot_start.pbs with stub qsub, enroot, tmux, nvidia-smi, curl on PATH."""

from __future__ import annotations

import shlex
from pathlib import Path

from kgserve.settings import Settings, load_settings

from .conftest import REPO, RUNTIME, Stubs

CREATE = str(RUNTIME / "enroot_create.pbs")
START = str(RUNTIME / "enroot_start.pbs")


def _select(shipped: Settings) -> str:
    assert shipped.cluster is not None
    c = shipped.cluster
    return f"select=1:host={c.node}:ngpus={c.gpus}:ncpus={c.cpus}:mem={c.memory}"


def test_the_shipped_cluster_is_hopper_34_with_one_gpu_and_session_go(shipped: Settings) -> None:
    assert shipped.cluster is not None
    assert (shipped.cluster.node, shipped.cluster.gpus, shipped.cluster.tmux_session) == ("hopper-34", 1, "go")


def test_create_submits_itself_with_the_configured_resources(
    stubs: Stubs, config_copy: Path, shipped: Settings
) -> None:
    result = stubs.run([CREATE])
    assert result.returncode == 0, result.stderr
    [call] = stubs.calls("qsub")
    args = call["args"]
    assert "select=1:host=hopper-34:ngpus=1:" in _select(shipped)
    assert args[args.index("-l") + 1] == _select(shipped)
    assert shipped.cluster is not None and f"walltime={shipped.cluster.create_walltime}" in args
    assert args[-1] == CREATE
    assert f"KG_REPO={REPO},KG_CONFIG={config_copy},KG_FORCE=0,KG_SUBMITTED=1" in args
    assert "-q" not in args  # queue: null -> the server's default
    assert stubs.calls("enroot") == []  # nothing is built on the login node


def test_create_job_fetches_pinned_assets_builds_and_exports_the_image(
    stubs: Stubs, config_copy: Path, shipped: Settings
) -> None:
    assert shipped.release is not None and shipped.cluster is not None
    job = {"PBS_JOBID": "4242.pbs", "KG_REPO": str(REPO)}
    result = stubs.run([CREATE], extra_env=job)
    assert result.returncode == 0, result.stdout + result.stderr
    urls = {a for call in stubs.calls("curl") for a in call["args"] if a.startswith("https://")}
    assert urls == {shipped.release.asset_url("cuda"), shipped.release.asset_url("trt"), shipped.release.network.url}
    assert {u.rsplit("/", 1)[1] for u in urls} >= {
        "katago-v1.18.1-cuda12.8-cudnn9.8.0-linux-x64.zip",
        "katago-v1.18.1-trt10.9.0-cuda12.8-linux-x64.zip",
    }
    enroot = [call["args"] for call in stubs.calls("enroot")]
    subcommands = [args[0] for args in enroot]
    assert subcommands == ["import", "list", "create", "start", "export", "remove"]
    assert enroot[0][-1] == f"docker://{shipped.cluster.base_image}"
    start = enroot[3]
    assert start[start.index("--mount") + 1] == f"{REPO}:{REPO}:none:x-create=dir,rbind"
    assert start[-3:] == ["bash", f"{REPO}/runtime/enroot_create.pbs", "--provision"]
    assert "KG_BACKENDS=cuda trt" in start
    image = config_copy.parent / "kgbench.sqsh"
    assert image.is_file() and not Path(f"{image}.partial.sqsh").exists()
    assert stubs.calls("nvidia-smi")
    logs = list((config_copy.parent / "logs").glob("enroot_create-*-4242.log"))
    assert len(logs) == 1 and "step 4/4" in logs[0].read_text()

    # idempotent: the same inputs keep the image; nothing downloaded or imported again
    stubs.log.unlink()
    again = stubs.run([CREATE], extra_env=job)
    assert again.returncode == 0, again.stderr
    assert "up to date" in again.stdout + again.stderr
    assert stubs.calls("curl") == [] and stubs.calls("enroot") == []

    # --force rebuilds the image from the already imported base image
    forced = stubs.run([CREATE, "--force"], extra_env=job)
    assert forced.returncode == 0, forced.stderr
    assert [c["args"][0] for c in stubs.calls("enroot")] == ["list", "create", "start", "export", "remove"]


def test_create_job_stops_at_the_first_error(stubs: Stubs, config_copy: Path) -> None:
    result = stubs.run([CREATE], extra_env={"PBS_JOBID": "7.pbs", "KG_REPO": str(REPO), "STUB_OFFLINE": "1"})
    assert result.returncode == 1
    assert "looks offline" in result.stdout + result.stderr
    assert stubs.calls("enroot") == []


def test_start_asks_for_an_interactive_job_on_hopper_34_with_one_gpu(
    stubs: Stubs, config_copy: Path, shipped: Settings
) -> None:
    result = stubs.run([START])
    assert result.returncode == 0, result.stderr
    [call] = stubs.calls("qsub")
    args = call["args"]
    assert args[0] == "-I"
    assert _select(shipped) in args and "ngpus=1" in _select(shipped)
    assert args[args.index("--") :] == ["--", "/bin/bash", START]
    assert shipped.cluster is not None and f"walltime={shipped.cluster.walltime}" in args


def test_start_job_mounts_repo_and_home_data_dir_and_opens_tmux_go(
    stubs: Stubs, config_copy: Path, shipped: Settings
) -> None:
    settings = load_settings(config_copy)
    assert settings.cluster is not None
    settings.cluster.image_path.write_bytes(b"hsqs stub\n")
    job = {"PBS_JOBID": "99.pbs", "KG_REPO": str(REPO)}
    result = stubs.run([START], extra_env=job)
    assert result.returncode == 0, result.stderr
    enroot = [call["args"] for call in stubs.calls("enroot")]
    assert enroot[1] == ["create", "--name", "kgbench", str(settings.cluster.image_path)]
    [tmux] = [call["args"] for call in stubs.calls("tmux")]
    assert tmux[:4] == ["new-session", "-A", "-s", "go"]
    container = shlex.split(tmux[6])
    assert container[:2] == ["enroot", "start"]
    mounts = [container[i + 1] for i, arg in enumerate(container) if arg == "--mount"]
    home = settings.engine.home_data_dir
    assert mounts == [f"{REPO}:{REPO}:none:x-create=dir,rbind", f"{home}:{home}:none:x-create=dir,rbind"]
    assert home.is_dir()
    assert tmux[7:] == [";", "set-option", "-t", "go", "default-command", tmux[6]]

    # the container exists and the image did not change: attach without re-creating it
    stubs.log.unlink()
    again = stubs.run([START], extra_env={**job, "STUB_ENROOT_LIST": "kgbench"})
    assert again.returncode == 0, again.stderr
    assert [c["args"][0] for c in stubs.calls("enroot")] == ["list"]
    assert stubs.calls("tmux")[0]["args"][:4] == ["new-session", "-A", "-s", "go"]

    # a rebuilt image replaces the container (enroot create refuses an existing name)
    stubs.log.unlink()
    settings.cluster.image_path.write_bytes(b"hsqs stub, rebuilt\n")
    rebuilt = stubs.run([START], extra_env={**job, "STUB_ENROOT_LIST": "kgbench"})
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert [c["args"][:2] for c in stubs.calls("enroot")] == [["list"], ["remove", "--force"], ["create", "--name"]]


def test_start_job_without_an_image_says_how_to_build_it(stubs: Stubs, config_copy: Path) -> None:
    result = stubs.run([START], extra_env={"PBS_JOBID": "5.pbs", "KG_REPO": str(REPO)})
    assert result.returncode == 1
    assert "runtime/enroot_create.pbs" in result.stderr
    assert stubs.calls("tmux") == []


def test_create_here_builds_without_qsub(stubs: Stubs, config_copy: Path) -> None:
    result = stubs.run([CREATE, "--here"])
    assert result.returncode == 0, result.stderr
    assert stubs.calls("qsub") == []
    assert [c["args"][0] for c in stubs.calls("enroot")][-2:] == ["export", "remove"]
    assert list((config_copy.parent / "logs").glob("enroot_create-*-here.log"))


QUALIFY = str(RUNTIME / "qualify_node.pbs")


def test_qualify_submits_itself_with_the_budget_in_its_walltime(stubs: Stubs, config_copy: Path) -> None:
    result = stubs.run([QUALIFY, "--net", "katrain", "--budget", "45m"])
    assert result.returncode == 0, result.stderr
    [call] = stubs.calls("qsub")
    args = call["args"]
    assert "walltime=01:15:00" in args  # 45 minutes of budget + 30 for the container, the net and the report
    assert args[-1] == QUALIFY
    assert f"KG_REPO={REPO},KG_CONFIG={config_copy},KG_QUALIFY_NET=katrain,KG_QUALIFY_BUDGET=45m,KG_SUBMITTED=1" in args
    assert stubs.calls("enroot") == []
    bad = stubs.run([QUALIFY, "--budget", "soon"])
    assert bad.returncode == 1 and "--budget soon" in bad.stderr and stubs.calls("qsub") == [call]


def test_qualify_job_runs_the_qualification_in_a_fresh_container(stubs: Stubs, config_copy: Path) -> None:
    settings = load_settings(config_copy)
    assert settings.cluster is not None
    settings.cluster.image_path.write_bytes(b"hsqs stub\n")
    job = {"PBS_JOBID": "77.pbs", "KG_REPO": str(REPO), "KG_QUALIFY_NET": "synthetic:b40c768nbt"}
    result = stubs.run([QUALIFY], extra_env=job)
    assert result.returncode == 0, result.stderr
    enroot = [call["args"] for call in stubs.calls("enroot")]
    assert [args[0] for args in enroot] == ["create", "start", "remove"]
    start = enroot[1]
    command = shlex.split(start[-1])
    assert command[command.index("exec") + 1 :][:3] == [f"{settings.cluster.venv}/bin/python", "-m", "kgbench.qualify"]
    assert "--net" in command and command[command.index("--net") + 1] == "synthetic:b40c768nbt"
    out = command[command.index("--out") + 1]
    assert out.startswith(str(config_copy.parent / "logs" / "qualify-")) and out.endswith("-77")
    assert enroot[2][:2] == ["remove", "--force"]  # the job's own container never outlives it


def test_qualify_here_runs_without_qsub_or_enroot(stubs: Stubs, config_copy: Path) -> None:
    result = stubs.run([QUALIFY, "--here", "--dry-run", "--net", "katrain", "--budget", "10m"])
    assert result.returncode == 0, result.stderr
    assert "-m kgbench.qualify" in result.stdout and "--net katrain --budget 10m" in result.stdout
    assert stubs.calls("qsub") == [] and stubs.calls("enroot") == []


def test_build_katago_refuses_what_it_cannot_build(tmp_path: Path) -> None:
    """runtime/build_katago.sh without a source tarball, or without nvcc: one clear line, nothing written."""
    import subprocess

    script = str(RUNTIME / "build_katago.sh")
    missing = subprocess.run([script, str(tmp_path / "none.tar.gz")], capture_output=True, text=True, timeout=30)
    assert missing.returncode == 1 and "no source tarball at" in missing.stderr
    tarball = tmp_path / "src.tar.gz"
    tarball.write_bytes(b"")
    no_nvcc = subprocess.run(
        [script, str(tarball), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert no_nvcc.returncode == 1 and "nvcc not found" in no_nvcc.stderr and not (tmp_path / "out").exists()
