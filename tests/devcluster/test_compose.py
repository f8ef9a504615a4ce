"""docker-compose.slurm.yml: valid, complete, and built on the same config generator.

``docker-compose config`` (Debian's docker-compose) validates and resolves the file without
an engine; tests/devcluster/test_compose_cluster.py brings it up for real.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from synergy_slurm.devcluster.conf import DevClusterSpec, slurm_conf

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.slurm.yml"


@pytest.fixture(scope="module")
def resolved() -> dict:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.fail("docker-compose not installed (scripts/bootstrap-system.sh installs it)")
    out = subprocess.run([exe, "-f", str(COMPOSE), "config"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def test_services_roles_and_shape(resolved):
    services = resolved["services"]
    assert set(services) == {"slurmctld", "n1", "n2", "n3", "n4", "login"}
    assert services["slurmctld"]["command"] == ["controller"]
    for n in ("n1", "n2", "n3", "n4"):
        assert services[n]["command"] == ["node", n] and services[n]["hostname"] == n
    assert services["login"]["command"] == ["login"]


def test_everything_it_builds_or_mounts_exists(resolved):
    for name, svc in resolved["services"].items():
        build = svc["build"]
        ctx = Path(build["context"])
        assert ctx.is_dir(), name
        dockerfile = ctx / build.get("dockerfile", "Dockerfile")
        assert dockerfile.is_file(), dockerfile
        for vol in svc.get("volumes", []):
            src = vol["source"] if isinstance(vol, dict) else vol.split(":")[0]
            kind = vol.get("type") if isinstance(vol, dict) else None
            if kind == "bind" or str(src).startswith(("/", ".")):
                assert Path(src).exists(), f"{name} mounts missing {src}"
    # What the image copies: the wheels scripts/compose-cluster.sh gathers (made at up)
    # and files of the checkout; each let through .dockerignore.
    dockerfile = (REPO / "scripts/docker/Dockerfile").read_text()
    script = (REPO / "scripts/compose-cluster.sh").read_text()
    allowed = [line[1:] for line in (REPO / ".dockerignore").read_text().splitlines()
               if line.startswith("!")]
    copies = [m.groups() for m in re.finditer(r"^COPY\s+(\S+)\s+(\S+)$", dockerfile, re.M)]
    assert copies
    for src, _ in copies:
        assert src in allowed, f"{src} is kept out of the build context by .dockerignore"
        if src == "build/docker/wheels":
            assert 'dir=build/docker/wheels' in script
        else:
            assert (REPO / src).exists(), f"Dockerfile copies missing {src}"
    entry = re.search(r'ENTRYPOINT \["([^"]+)"\]', dockerfile).group(1)
    assert ("scripts/docker/entrypoint.sh", entry) in copies


def test_containers_use_the_same_generator():
    entry = (REPO / "scripts/docker/entrypoint.sh").read_text()
    assert "synergy dev-cluster config --containers" in entry
    local = slurm_conf(DevClusterSpec(Path("/x"), hostname="h"))
    cont = slurm_conf(DevClusterSpec(Path("/x"), containers=True))
    shape = re.compile(r"CPUs=\d+ RealMemory=\d+ Gres=gpu:\d+")
    assert shape.findall(local) == shape.findall(cont) and len(shape.findall(cont)) == 4
    part = re.compile(r"DefCpuPerGPU=\d+ DefMemPerGPU=\d+")
    assert part.findall(local) == part.findall(cont)
    assert "NodeHostname=n1 Port=6818" in cont and "SlurmctldHost=slurmctld" in cont


def test_the_network_is_internal_and_nothing_is_published(resolved):
    assert resolved["networks"]["slurm"].get("internal") is True
    for name, svc in resolved["services"].items():
        assert not svc.get("ports"), f"{name} publishes ports"
        assert svc["networks"] and set(svc["networks"]) == {"slurm"}, name


def test_the_compose_controller_runs_from_the_demos_generated_config(tmp_path):
    """The controller's container writes its synergy.toml with the same generator as the
    demo (render_toml: every key), not by hand; the file loads and passes the checks."""
    from click.testing import CliRunner

    from synergy_slurm.cli.main import main
    from synergy_slurm.config import check_config, load_config

    entry = (REPO / "scripts/docker/entrypoint.sh").read_text()
    assert '--hook --controller' in entry and "<<TOML" not in entry
    res = CliRunner().invoke(main, ["dev-cluster", "config", "--containers", "--dir",
                                   str(tmp_path), "--hook", "--controller"])
    assert res.exit_code == 0, res.output
    path = tmp_path / "synergy.toml"
    assert str(path) in res.output
    checked, problems = check_config(path, missing_ok=False)
    assert problems == [] and checked is not None
    cfg = load_config(path, missing_ok=False)
    assert cfg.controller.mode == "enforce" and cfg.controller.allocator == "tune"
    assert cfg.slurm.conf == str(tmp_path / "etc" / "slurm.conf")
    assert cfg.controller.audit_log == str(tmp_path / "audit.jsonl")
    assert cfg.hook.partitions == ("gpu",)
