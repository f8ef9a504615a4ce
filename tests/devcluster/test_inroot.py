"""The venv inside a release's root: what it is built from and how a command enters it
(the build itself runs in tests/controller/test_pyslurm_on_slurm.py's CI step)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from synergy_slurm.devcluster import inroot
from synergy_slurm.devcluster.releases import ReleaseError, SlurmInstall


def test_the_venv_gets_the_runtime_dependencies_only():
    reqs = inroot.runtime_requirements()
    names = {r.split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in reqs}
    assert {"numpy", "highspy", "click", "psutil", "prometheus-client"} <= names
    assert "matplotlib" not in names                    # plots: not the controller's
    assert not names & {"pytest", "hypothesis", "ruff", "torch", "pyslurm"}   # extras


def test_a_command_enters_the_root_with_the_venv_first_and_this_checkout_importable(tmp_path):
    install = SlurmInstall("24.11.5", tmp_path)
    cmd = inroot.command(install, ["python", "-m", "synergy_slurm", "status"],
                         {"SLURM_CONF": "/tmp/c/etc/slurm.conf"}, cwd=Path("/tmp"))
    assert cmd[:4] == ["unshare", "--mount", "--propagation", "private"]
    split = cmd.index("--")
    binds = [cmd[i + 1] for i in range(split) if cmd[i] == "--bind"]
    assert "/tmp" in binds and str(inroot.CHECKOUT) in binds
    assert sys.prefix not in binds                      # the root's own Python runs it
    run = cmd[split + 1:]
    assert run[:4] == ["/usr/bin/env", "-i", "-C", "/tmp"]
    assert f"PATH={inroot.VENV}/bin:/usr/bin:/bin" in run
    assert f"PYTHONPATH={inroot.CHECKOUT}" in run and "SLURM_CONF=/tmp/c/etc/slurm.conf" in run
    assert run[-4:] == ["python", "-m", "synergy_slurm", "status"]


def test_no_venv_for_the_systems_slurm_nor_without_a_source(tmp_path):
    with pytest.raises(ReleaseError, match="inside a release's root"):
        inroot.ensure_venv(SlurmInstall("22.05.8"), tmp_path / "x.tar.gz")
    with pytest.raises(ReleaseError, match="no pyslurm source"):
        inroot.ensure_venv(SlurmInstall("24.11.5", tmp_path), tmp_path / "missing.tar.gz")
    assert not inroot.venv_ready(SlurmInstall("24.11.5", tmp_path))
    with pytest.raises(ReleaseError, match="needs no root"):
        inroot.command(SlurmInstall("22.05.8"), ["python"], {})
