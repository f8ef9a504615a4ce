"""Issue 43, item 10: what the controller needs from Slurm, established on the dev cluster.

With automatic profiling off the controller reads the queue, updates other users' pending
jobs (shape), releases them and requeues running ones. These are Slurm operator rights
(``sacctmgr ... AdminLevel=Operator``): the test runs one enforcing round as a plain Unix
user that is a Slurm operator, with no root. Without the level the same round changes
nothing (so it is the level that makes it work). What stays root's: automatic profiling
(``sbatch --uid`` of another user's job, refused to an operator, and the spool it hands
to that user) and writing AdminComment (Slurm keeps it to admins).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest

from synergy_slurm.hook.table import TABLE_NAME, HookTable

from ..conftest import ADMIN_USER, UNPRIVILEGED_USER
from ..slurm.helpers import cancel_all, job_fields, per_gpu, submit, wait_for

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
OPERATOR = ADMIN_USER            # made with the cluster (tests/conftest.py)


def fresh_table(env) -> None:
    HookTable(generated_at=int(time.time()), node_cpus=24, node_mem_mb=500000, node_gpus=8,
              partitions=("gpu",), default_partition="gpu", max_age_s=120,
              profiles={}, hold_unknown=True,
              hold_known=True).write(env["cluster"].etc / TABLE_NAME)


@pytest.fixture
def operator_home(env):
    """The controller's own directory (its config, profiles, state and audit log), owned
    by the operator as /var/lib/synergy is by the service user."""
    import pwd

    pw = pwd.getpwnam(OPERATOR)
    work = Path(tempfile.mkdtemp(prefix="synergy-operator-"))
    doc = env["cfg_path"].read_text()
    profiles = work / "profiles.json"
    shutil.copyfile(env["tmp"] / "profiles.json", profiles)
    cfg = tomllib.loads(doc)
    text = doc.replace(cfg["profiles"]["file"], str(profiles))
    for key in ("store",):
        text = text.replace(cfg["profiles"][key], str(work / "profiles.db"))
    for key in ("state_db", "audit_log"):
        text = text.replace(cfg["controller"][key], str(work / Path(cfg["controller"][key]).name))
    # The hook's table stays root's in this test (slurmctld's directory); at a site it is
    # in /var/lib/synergy, the service user's.
    text = text.replace("[controller]\n", "[controller]\nwrite_hook_table = false\n")
    (work / "synergy.toml").write_text(text)
    for path in (work, *work.iterdir()):
        os.chown(path, pw.pw_uid, pw.pw_gid)
    work.chmod(0o755)
    yield work
    shutil.rmtree(work, ignore_errors=True)


def as_operator(env, *argv: str) -> subprocess.CompletedProcess:
    """A command as the operator, a plain Unix user: no root, no sudo."""
    run_env = dict(env["cli"].env(), PYTHONPATH=str(REPO), HOME="/")
    return subprocess.run(["runuser", "-u", OPERATOR, "--", *argv], capture_output=True,
                          text=True, env=run_env, cwd="/", check=False, timeout=120)


def one_round(env, work: Path) -> subprocess.CompletedProcess:
    return as_operator(env, sys.executable, "-m", "synergy_slurm.cli.main", "controller",
                       "run", "--once", "--config", str(work / "synergy.toml"))


def test_the_controller_runs_as_a_slurm_operator_without_root(env, operator_home):
    cli, tmp = env["cli"], env["tmp"]
    sacctmgr = env["cli"].run
    fresh_table(env)
    try:
        sacctmgr("sacctmgr", ["-i", "add", "user", OPERATOR, "account=lab-a"])
        time.sleep(2)
        # Root's gnmt job, held by the hook unshaped (the hook's table knows no profile):
        # the controller must shape it (gnmt: 1 core per GPU) and release it.
        jid = submit(cli, "sleep 2", "--gpus=1", "--comment=synergy:profile=gnmt",
                     "-o", "/dev/null", tmp=tmp)
        before = job_fields(cli, jid)
        assert before["Reason"] == "JobHeldUser"
        plain = one_round(env, operator_home)
        held = job_fields(cli, jid)
        assert held["Reason"] == "JobHeldUser", plain.stdout + plain.stderr
        assert held.get("CpusPerTres") == before.get("CpusPerTres")
        assert "Invalid user id" in plain.stdout + plain.stderr
        sacctmgr("sacctmgr", ["-i", "modify", "user", OPERATOR, "set",
                              "adminlevel=Operator"])
        time.sleep(2)                 # slurmdbd pushes the level to slurmctld
        res = one_round(env, operator_home)
        assert res.returncode == 0, res.stdout + res.stderr
        shaped = wait_for(cli, jid, {"RUNNING", "COMPLETED"}, 45)
        assert per_gpu(shaped, "CpusPerTres") == 1, (shaped, res.stdout)
        # Requeue (of a job that allows it) is an operator's too.
        rq = submit(cli, "sleep 300", "--gpus=1", "--requeue", "--comment=synergy:off",
                    "-o", "/dev/null", tmp=tmp)
        wait_for(cli, rq, {"RUNNING"}, 45)
        requeued = as_operator(env, "scontrol", "requeuehold", str(rq))
        assert requeued.returncode == 0, requeued.stderr
        script_of = as_operator(env, "scontrol", "write", "batch_script", str(rq), "-")
        assert script_of.returncode == 0 and "sleep 300" in script_of.stdout, \
            script_of.stderr
        # What stays root's: a job submitted as another user (automatic profiling).
        script = operator_home / "p.sh"
        script.write_text("#!/bin/sh\ntrue\n")
        script.chmod(0o755)
        as_user = as_operator(env, "sbatch", f"--uid={UNPRIVILEGED_USER}", "--gpus=1",
                              "-o", "/dev/null", str(script))
        admin_comment = as_operator(env, "scontrol", "update", f"JobId={rq}",
                                    "AdminComment=synergy.held=0")
        print(f"\nas an operator: sbatch --uid rc={as_user.returncode} "
              f"({as_user.stderr.strip()[:120]}); AdminComment update "
              f"rc={admin_comment.returncode} ({admin_comment.stderr.strip()[:120]})")
        assert as_user.returncode != 0 and admin_comment.returncode != 0
    finally:
        sacctmgr("sacctmgr", ["-i", "delete", "user", OPERATOR])
        (env["cluster"].etc / TABLE_NAME).unlink(missing_ok=True)
        cancel_all(cli)
