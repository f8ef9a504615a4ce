"""`synergy status` as an ordinary user on a login node: it reads the controller's state
read-only, filters by user and job, explains one job, and changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from synergy_slurm.controller.daemon import Controller

from ..slurm.helpers import submit
from .conftest import load
from .test_controller_on_slurm import fresh_table

pytestmark = pytest.mark.slurm
EXE = Path(sys.executable).with_name("synergy")


def test_status_as_an_unprivileged_user(env, unprivileged_user):
    fresh_table(env)
    cli, tmp = env["cli"], env["tmp"]
    public = Path(tempfile.mkdtemp(prefix="synergy-status-"))
    public.chmod(0o755)
    cfg_path = public / "synergy.toml"
    cfg_path.write_text(env["cfg_path"].read_text().replace(
        f'state_db = "{tmp}/state.db"', f'state_db = "{public}/state.db"'))
    cfg_path.chmod(0o644)
    a = submit(cli, "sleep 30", "--gpus=1", "--comment=synergy:profile=alexnet", "-o",
               "/dev/null", tmp=tmp)
    b = submit(cli, "sleep 30", "--gpus=8", "-o", "/dev/null", tmp=tmp)
    ctl = Controller(load(env, state_db=str(public / "state.db")))
    assert ctl.run_round().errors == 0

    def status(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["runuser", "-u", unprivileged_user, "--", str(EXE), "status",
                               "--config", str(cfg_path), *args], capture_output=True,
                              text=True, timeout=60, check=False)

    # While the controller has its state open (its WAL files exist) ...
    live = status()
    assert live.returncode == 0 and live.stderr == "", live.stderr
    ctl.state.close()
    # ... and once it has stopped (they are gone, and the user may not make them).
    before = {p.name: p.stat().st_mtime_ns for p in public.iterdir()}
    res = status()
    assert res.returncode == 0, res.stderr
    def timeless(out: str) -> list[str]:     # the round's and the config's ages move
        return [x for x in out.splitlines()[1:] if not x.startswith("configuration: ")]

    assert timeless(res.stdout) == timeless(live.stdout)
    assert res.stderr == ""
    lines = res.stdout.splitlines()
    assert lines[0].startswith("last round 1 at ") and "enforce mode" in lines[0]
    assert any(line.split()[0] == str(a) for line in lines[2:])
    assert any(line.split()[0] == str(b) for line in lines[2:])
    one = status("--job", str(a))
    assert one.returncode == 0, one.stderr
    text = one.stdout
    assert "profile: alexnet" in text and "planned: 12 cores/GPU" in text
    assert "release 12c/125000MB -> 12c/125000MB" in text   # what the controller did
    mine = json.loads(status("--user", "nobody-else", "--format", "json").stdout)
    assert mine["jobs"] == [] and mine["last_round"]["id"] == 1
    time.sleep(0.1)
    assert {p.name: p.stat().st_mtime_ns for p in public.iterdir()} == before


def test_where_privatedata_hides_jobs_a_user_sees_only_their_own(env, unprivileged_user):
    """Issue 43, item 9: with PrivateData=jobs (squeue then shows a user their own jobs
    only), `synergy status` does the same; before, the state file was readable by all
    and showed every user's jobs, keys and notes."""
    spec, cli, tmp = env["cluster"], env["cli"], env["tmp"]
    fresh_table(env)
    public = Path(tempfile.mkdtemp(prefix="synergy-status-"))
    public.chmod(0o755)
    cfg_path = public / "synergy.toml"
    cfg_path.write_text(env["cfg_path"].read_text().replace(
        f'state_db = "{tmp}/state.db"', f'state_db = "{public}/state.db"'))
    cfg_path.chmod(0o644)
    conf = spec.conf_path.read_text()
    spec.conf_path.write_text(conf + "PrivateData=jobs\n")
    try:
        cli.run("scontrol", ["reconfigure"])
        script = public / "job.sh"
        script.write_text("#!/bin/sh\nsleep 30\n")
        script.chmod(0o755)
        theirs = subprocess.run(
            ["runuser", "-u", unprivileged_user, "--", "sbatch", "--parsable", "--gpus=1",
             "-o", "/dev/null", "-D", str(public), str(script)], capture_output=True,
            text=True, timeout=60, check=True, env=cli.env())
        mine = int(theirs.stdout.strip().split(";")[0])
        root_job = submit(cli, "sleep 30", "--gpus=1", "--comment=synergy:profile=alexnet",
                          "-o", "/dev/null", tmp=tmp)
        ctl = Controller(load(env, state_db=str(public / "state.db")))
        assert ctl.run_round().errors == 0
        ctl.state.close()
        assert (public / "state.db").stat().st_mode & 0o077 == 0
        res = subprocess.run(["runuser", "-u", unprivileged_user, "--", str(EXE), "status",
                              "--config", str(cfg_path), "--format", "json"],
                             capture_output=True, text=True, timeout=60, check=False)
        assert res.returncode == 0, res.stderr
        seen = [j["job_id"] for j in json.loads(res.stdout)["jobs"]]
        assert seen == [mine] and root_job not in seen
    finally:
        spec.conf_path.write_text(conf)
        cli.run("scontrol", ["reconfigure"])
