"""synergy releases only the holds it made (issue 43, item 3), on the real test cluster: a
job the hook held and the controller released, then held again by an admin (JobHeldAdmin)
or by its user (JobHeldUser), stays held through controller rounds, the fail-safe and the
controller's stop; a requeue that fails leaves no job held (item 5)."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.main import main
from synergy_slurm.controller.daemon import Controller
from synergy_slurm.hook.table import TABLE_NAME, HookTable
from synergy_slurm.slurm.commands import SlurmError
from synergy_slurm.slurm.reader import SlurmReader
from synergy_slurm.slurm.writer import Shape, SlurmWriter

from ..slurm.helpers import job_fields, submit, wait_file
from .conftest import load

pytestmark = pytest.mark.slurm


def fresh_table(env) -> None:
    HookTable(generated_at=int(time.time()), node_cpus=24, node_mem_mb=500000, node_gpus=8,
              partitions=("gpu",), default_partition="gpu", max_age_s=60,
              profiles={"alexnet": (12, 125000)}, hold_unknown=True,
              hold_known=True).write(env["cluster"].etc / TABLE_NAME)


def released_by_synergy(env, ctl: Controller, job_id: int) -> dict[str, str]:
    """Run rounds until the controller has released the job the hook held; its record."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ctl.run_round()
        fields = job_fields(env["cli"], job_id)
        if fields.get("Priority") != "0":
            return fields
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} still held: {job_fields(env['cli'], job_id)}")


def assert_still_held(env, job_id: int, reason: str) -> None:
    fields = job_fields(env["cli"], job_id)
    assert (fields["JobState"], fields["Priority"], fields["Reason"]) == (
        "PENDING", "0", reason), fields


@pytest.mark.parametrize("verb, reason", [("hold", "JobHeldAdmin"), ("uhold", "JobHeldUser")])
def test_a_hold_made_after_synergys_release_is_never_undone(env, verb, reason):
    fresh_table(env)
    cli, tmp = env["cli"], env["tmp"]
    # A begin time an hour away keeps it pending once released, so that it can be held.
    jid = submit(cli, "true", "--gpus=1", "--comment=synergy:profile=alexnet",
                 "--begin=now+3600", "-o", "/dev/null", tmp=tmp)
    held = job_fields(cli, jid)
    # The hook's hold shows as the user's (what tells it apart from an admin's).
    assert (held["Priority"], held["Reason"]) == ("0", "JobHeldUser"), held
    assert "synergy.held=1" in held["AdminComment"]
    ctl = Controller(load(env))
    after = released_by_synergy(env, ctl, jid)
    assert after["JobState"] == "PENDING", after
    assert "synergy.held=0" in after["AdminComment"]    # the controller cleared its tag

    cli.run("scontrol", [verb, str(jid)])               # an admin's (or a user's) hold
    assert_still_held(env, jid, reason)
    for _ in range(3):
        res = ctl.run_round()
        assert res.errors == 0, res.results
    assert_still_held(env, jid, reason)
    (env["cluster"].etc / TABLE_NAME).unlink()         # stale: the fail-safe acts
    out = CliRunner().invoke(main, ["hook", "failsafe", "--config", str(env["cfg_path"])])
    assert out.exit_code == 0 and str(jid) not in out.output, out.output
    assert_still_held(env, jid, reason)
    assert ctl.release_held() == []                     # what the controller's stop does
    assert_still_held(env, jid, reason)
    assert [j.job_id for j in SlurmReader(cli).snapshot().jobs if j.held_by_synergy] == []


def test_an_admins_hold_on_a_job_the_hook_still_holds_is_left_to_the_admin(env):
    fresh_table(env)
    cli, tmp = env["cli"], env["tmp"]
    jid = submit(cli, "true", "--gpus=1", "--comment=synergy:profile=alexnet",
                 "--begin=now+3600", "-o", "/dev/null", tmp=tmp)
    cli.run("scontrol", ["hold", str(jid)])
    assert_still_held(env, jid, "JobHeldAdmin")
    ctl = Controller(load(env))
    for _ in range(3):
        ctl.run_round()
    assert ctl.release_held() == []
    assert_still_held(env, jid, "JobHeldAdmin")


def test_a_requeue_that_fails_leaves_no_job_held(env):
    """Issue 43, item 5: the requeue stops the job, then the reshape fails (here: the job
    is not PENDING within the wait, and the shape asks for more cores than a node has).
    The job must not stay held: released at once, or by the next rounds."""
    cli, tmp = env["cli"], env["tmp"]
    out = tmp / "rq"
    jid = submit(cli, 'echo "restarts=${SLURM_RESTART_COUNT:-0}"; sleep 300', "--gpus=1",
                 "--cpus-per-gpu=2", "--requeue", "--time=60", "--open-mode=append",
                 "-o", str(out), tmp=tmp)
    wait_file(out, "restarts=0")
    job = SlurmReader(cli).snapshot().job(jid)
    assert job is not None and job.running
    with pytest.raises(SlurmError):
        SlurmWriter(cli, enforce=True).requeue_reshape(job, Shape(100, 1000), timeout_s=0)
    ctl = Controller(load(env))
    deadline = time.monotonic() + 60
    fields = job_fields(cli, jid)
    while time.monotonic() < deadline and fields.get("Priority") == "0":
        ctl.run_round()
        time.sleep(0.5)
        fields = job_fields(cli, jid)
    assert fields.get("Priority") != "0", fields
    assert "synergy.held=0" in fields.get("AdminComment", ""), fields


def test_a_users_hold_after_they_released_the_hooks_hold_early_is_theirs(env):
    """The owner may release the hook's hold before the controller does (it shows as
    theirs); the next round clears synergy's tag, so the hold they put on later is never
    taken for synergy's."""
    fresh_table(env)
    cli, tmp = env["cli"], env["tmp"]
    jid = submit(cli, "true", "--gpus=1", "--comment=synergy:profile=alexnet",
                 "--begin=now+3600", "-o", "/dev/null", tmp=tmp)
    cli.run("scontrol", ["release", str(jid)])          # released early, not by synergy
    ctl = Controller(load(env))
    ctl.run_round()
    assert "synergy.held=0" in job_fields(cli, jid)["AdminComment"]
    cli.run("scontrol", ["uhold", str(jid)])
    for _ in range(3):
        ctl.run_round()
    assert ctl.release_held() == []
    assert_still_held(env, jid, "JobHeldUser")


def test_a_requeued_job_left_held_is_released_by_the_fail_safe(env):
    """Where even the release after a failed requeue fails (slurmctld gone for a moment),
    synergy's tag, set before the requeue, makes the job one the fail-safe releases: a
    requeue hold shows as the user's (JobHeldUser), never as an admin's."""
    cli, tmp = env["cli"], env["tmp"]
    out = tmp / "rq"
    jid = submit(cli, 'echo "restarts=${SLURM_RESTART_COUNT:-0}"; sleep 300', "--gpus=1",
                 "--requeue", "--time=60", "-o", str(out), tmp=tmp)
    wait_file(out, "restarts=0")
    job = SlurmReader(cli).snapshot().job(jid)
    assert job is not None
    writer = SlurmWriter(cli, enforce=True)
    writer._tag_held(job)                             # what requeue_reshape does first
    writer.mutate(["requeuehold", str(jid)])          # ... and no release after it
    writer.wait_state(jid, "PENDING", 60)
    left = SlurmReader(cli).snapshot().job(jid)
    assert left is not None and left.held_by_synergy, left
    out = CliRunner().invoke(main, ["hook", "failsafe", "--config", str(env["cfg_path"])])
    assert out.exit_code == 0 and f"released {jid}" in out.output, out.output
    fields = job_fields(cli, jid)
    assert fields["Priority"] != "0" and "synergy.held=0" in fields["AdminComment"], fields
