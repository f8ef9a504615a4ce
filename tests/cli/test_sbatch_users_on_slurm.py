"""synergy-sbatch on the real cluster as root and as an ordinary user: what reaches
Slurm, sbatch's own errors passed through, and a user who cannot touch others' jobs."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from ..conftest import UNPRIVILEGED_USER
from ..slurm.helpers import cancel_all, wait_for

REPO = Path(__file__).resolve().parents[2]
TEST_USER = UNPRIVILEGED_USER

pytestmark = pytest.mark.slurm


def test_submits_as_root_and_as_an_unprivileged_user(slurm_cluster, slurm_cli, tmp_path,
                                                    monkeypatch):
    cancel_all(slurm_cli)
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf_path))
    exe = shutil.which("synergy-sbatch", path=str(REPO / ".venv" / "bin")) or \
        shutil.which("synergy-sbatch")
    assert exe, "synergy-sbatch not installed"
    env = dict(os.environ, SLURM_CONF=str(slurm_cluster.conf_path))
    res = subprocess.run([exe, "--parsable", "--profile-key", "res18", "--requeue-ok",
                          "--gpus=1", "-o", "/dev/null", "--wrap", "sleep 1"],
                         capture_output=True, text=True, env=env, check=False)
    assert res.returncode == 0, res.stderr
    jid = int(res.stdout.strip())
    fields = slurm_cli.run("scontrol", ["show", "job", "-o", str(jid)])
    assert "Comment=synergy:profile=res18 synergy:requeue-ok" in fields
    assert "Requeue=1" in fields
    wait_for(slurm_cli, jid, {"COMPLETED"})
    # sbatch's own errors pass through unchanged, with its exit code.
    bad = subprocess.run([exe, "--gpus=1", "--partition=nosuch", "--wrap", "true"],
                         capture_output=True, text=True, env=env, check=False)
    assert bad.returncode != 0 and "invalid partition" in bad.stderr.lower()


def test_an_unprivileged_user_submits_as_themself(slurm_cluster, slurm_cli, unprivileged_user):
    """An ordinary user submits as themself and cannot touch root's jobs."""
    cancel_all(slurm_cli)
    exe = shutil.which("synergy-sbatch", path=str(REPO / ".venv" / "bin")) or \
        shutil.which("synergy-sbatch")
    env = dict(os.environ, SLURM_CONF=str(slurm_cluster.conf_path))
    probe = subprocess.run(["runuser", "-u", TEST_USER, "--", exe, "--synergy-help"],
                           capture_output=True, text=True, cwd="/", check=False)
    if probe.returncode != 0:
        pytest.skip(f"this checkout's Python is not readable by other users: {probe.stderr}")
    other = int(slurm_cli.run("sbatch", ["--parsable", "--hold", "--gpus=1", "-o",
                                         "/dev/null", "--wrap", "true"]).strip())
    work = Path(tempfile.mkdtemp(prefix="synergy-sbatch-"))
    try:
        work.chmod(0o777)
        res = subprocess.run(["runuser", "-u", TEST_USER, "--", exe, "--parsable",
                              "--profile-key", "gnmt", "--gpus=1", f"--chdir={work}",
                              "-o", "/dev/null", "--wrap", "sleep 1"], capture_output=True,
                             text=True, env=env, cwd=work, check=False)
        assert res.returncode == 0, res.stderr
        mine = int(res.stdout.strip())
        assert f"UserId={TEST_USER}(" in slurm_cli.run("scontrol", ["show", "job", "-o",
                                                                   str(mine)])
        deny = subprocess.run(["runuser", "-u", TEST_USER, "--", "scontrol", "update",
                               f"JobId={other}", "CpusPerTres=gres:gpu:9"],
                              capture_output=True, text=True, env=env, cwd=work, check=False)
        assert deny.returncode != 0
        assert "CpusPerTres=gres:gpu:9" not in slurm_cli.run("scontrol", ["show", "job",
                                                                          "-o", str(other)])
    finally:
        shutil.rmtree(work, ignore_errors=True)
        cancel_all(slurm_cli)
