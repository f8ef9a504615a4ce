"""The controller profiles an unknown key on the real cluster, as the job's user.

The job is the emulated res18 (its true curve is known): the first job of the key runs
GPU-proportional, a lowest-priority profiling job runs the job's own script under the
profiler as that user, the result lands in the store, and the next job of the key is
shaped by it. A key whose script crashes stores nothing and is not resubmitted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from synergy_slurm.controller.daemon import Controller
from synergy_slurm.profiles.store import ProfileStore

from ..conftest import UNPRIVILEGED_USER
from ..slurm.helpers import cancel_all, job_fields, wait_for
from .conftest import load

pytestmark = pytest.mark.slurm
USER = UNPRIVILEGED_USER
SCALE = 0.1
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def user_dir(profiles_path, unprivileged_user):
    work = Path(tempfile.mkdtemp(prefix="synergy-autoprofile-"))
    work.chmod(0o777)
    shutil.copyfile(profiles_path, work / "profiles.json")
    (work / "profiles.json").chmod(0o644)
    yield work
    shutil.rmtree(work, ignore_errors=True)


def submit_as_user(env, work: Path, key: str, body: str, *extra: str) -> int:
    script = work / f"{key}.sh"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    exe = REPO / ".venv" / "bin" / "synergy-sbatch"
    res = subprocess.run(["runuser", "-u", USER, "--", str(exe), "--parsable",
                          "--profile-key", key, *extra, "--gpus=1", f"--chdir={work}",
                          "-o", "/dev/null", str(script)], capture_output=True, text=True,
                         env=env["cli"].env(), cwd=work, check=False)
    assert res.returncode == 0, res.stderr
    return int(res.stdout.strip())


def test_unknown_key_is_profiled_as_the_user_and_then_used(env, user_dir, paper_profiles):
    emulate = (f"exec {sys.executable} -m synergy_slurm.emulate --profiles "
               f"{user_dir / 'profiles.json'} --model res18 --iterations 100000 "
               f"--scale {SCALE}")
    cfg = load(env)
    cfg = type(cfg)(**{**cfg.__dict__, "profiling": type(cfg.profiling)(
        auto=True, budget_s=90, spool=str(user_dir / "spool"))})
    ctl = Controller(cfg)
    first = submit_as_user(env, user_dir, "auto-res18", emulate)
    res = ctl.run_round()
    [ev] = res.profiling
    assert (ev.what, ev.key, ev.user, ev.for_job) == ("submitted", "auto-res18", USER, first)
    job = job_fields(ctl.reader.cli, ev.slurm_job)
    assert job["UserId"].startswith(f"{USER}(") and job["GroupId"].startswith(f"{USER}(")
    assert job["Nice"] == "10000" and job["TimeLimit"] == "00:03:00"
    assert "synergy:off" in job["Comment"] and job["JobName"] == "synergy-profile-auto-res18"
    # Meanwhile the job itself runs GPU-proportional (3 cores/GPU on this cluster).
    assert wait_for(env["cli"], first, {"RUNNING"})["NumCPUs"] == "3"
    # One profiling job per key: the next round does not submit another.
    assert ctl.run_round().profiling == []
    deadline = time.monotonic() + 150
    stored_ev = []
    while time.monotonic() < deadline and not stored_ev:
        time.sleep(2)
        stored_ev = [e for e in ctl.run_round().profiling if e.what == "stored"]
    spool = user_dir / "spool"
    assert stored_ev, (list(spool.glob("*/slurm.out")) and
                       next(spool.glob("*/slurm.out")).read_text())
    got = ProfileStore(cfg.profiles.store).get("auto-res18")
    assert got is not None and 2 <= got.measured_points <= 8 and got.profiling_cpu_s > 0
    assert got.source.startswith(f"auto-profile job {ev.slurm_job} ({USER})")
    assert got.owner == USER          # measured for that user ([profiles] trust)
    true = paper_profiles["res18"]
    # Measured on a shared 2-core machine: within 10% (seen 7% off once under load; the
    # profile's neighbouring points differ by 14% or more, so a wrong point still fails).
    for c, row in zip(got.profile.cpu_grid, got.profile.throughput, strict=True):
        assert row[0] == pytest.approx(
            true.at(c, true.mem_grid[-1]) / (true.iter_time_s * SCALE), rel=0.10)
    rec = ctl.state.profiling()["auto-res18"]
    assert rec["status"] == "stored" and rec["cpu_s"] == pytest.approx(got.profiling_cpu_s)
    print(f"\nauto-profile of auto-res18: {got.measured_points} points, "
          f"{got.profiling_cpu_s:.1f} CPU-s, ideal {got.profile.ideal.cpus} cores/GPU")
    # The next job of the key is shaped by the measured profile (res18: 9 cores/GPU).
    second = submit_as_user(env, user_dir, "auto-res18", emulate)
    res = ctl.run_round()
    assert res.profiling == []
    shaped = [a for a in res.actions if a.job_id == second]
    assert shaped and shaped[0].after.cpus_per_gpu == 9, res.actions
    audit = [json.loads(x) for x in Path(cfg.controller.audit_log).read_text().splitlines()]
    assert [a["result"].split(":")[0] for a in audit if a["action"] == "profile"] == \
        ["submitted", "stored"]
    cancel_all(env["cli"])


def test_a_crashing_script_stores_nothing_and_is_not_resubmitted(env, user_dir,
                                                                  monkeypatch):
    """Also (issue 43, item 10): the profiling job's environment is clean, the user's
    passwd entry's, nothing of the controller's (--export=NONE)."""
    monkeypatch.setenv("SYNERGY_T_CONTROLLER_ONLY", "leaked")
    cfg = load(env)
    cfg = type(cfg)(**{**cfg.__dict__, "profiling": type(cfg.profiling)(
        auto=True, budget_s=30, spool=str(user_dir / "spool"))})
    ctl = Controller(cfg)
    submit_as_user(env, user_dir, "auto-crash",
                   "env > job.env; echo 'oops: no such dataset' >&2; exit 3",
                   "--dataset-size", "50G")
    [ev] = ctl.run_round().profiling
    assert ev.what == "submitted"
    # The job's --dataset-size reaches the profiler's memory model, with the site's
    # bandwidths from [profiling].
    # 50G in Slurm's binary units: 51,200 MB, 51.2 of synergy's GB.
    assert "--dataset-gb 51.2 --disk-gb-s 0.5 --mem-gb-s 10 --" in \
        submit_line(env, ctl, ev.slurm_job)
    wait_for(env["cli"], ev.slurm_job, {"COMPLETED", "FAILED"}, timeout_s=90)
    failed = []
    for _ in range(5):
        failed += [e for e in ctl.run_round().profiling if e.what == "failed"]
        if failed:
            break
        time.sleep(1)
    # Why is named, not what the job printed: the note and the audit log are read by
    # other users (issue 43), the output stays in the user's spool.
    assert failed and "ended without a result" in failed[0].detail
    assert "oops" not in failed[0].detail and "slurm.out" in failed[0].detail
    spool = Path(ctl.state.profiling()["auto-crash"]["spool"])
    assert "oops: no such dataset" in (spool / "slurm.out").read_text()
    job_env = (spool / "job.env").read_text()
    assert "SYNERGY_T_CONTROLLER_ONLY" not in job_env and f"USER={USER}" in job_env
    assert "HOME=/root" not in job_env
    assert ProfileStore(cfg.profiles.store).get("auto-crash") is None
    assert ctl.state.profiling()["auto-crash"]["status"] == "failed"
    assert ctl.run_round().profiling == []     # retried only after retry_after_s


def submit_line(env, ctl, job_id: int) -> str:
    """The job's command line with its arguments: 22.05's ``Command`` shows them, 26.05's
    ``SubmitLine``; 24.11's ``scontrol`` shows neither, its accounting record does."""
    fields = job_fields(ctl.reader.cli, job_id)
    if "SubmitLine" in fields or " " in fields["Command"]:
        return fields.get("SubmitLine", fields["Command"])
    for _ in range(20):
        out = env["cli"].run("sacct", ["-n", "-P", "-X", "-j", str(job_id), "-o",
                                      "SubmitLine"])
        if out.strip():
            return out
        time.sleep(0.5)
    return fields["Command"]
