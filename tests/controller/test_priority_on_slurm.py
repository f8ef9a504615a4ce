"""The `slurm` policy (the controller's default) orders jobs as Slurm starts them: on the
real cluster, a job an admin raised is started first by Slurm and planned first by us."""

from __future__ import annotations

import subprocess
import time

import pytest

from synergy_slurm.controller.classify import job_spec
from synergy_slurm.core import get_policy
from synergy_slurm.hook.table import TABLE_NAME
from synergy_slurm.slurm.reader import SlurmReader

from ..slurm.helpers import cancel_all, job_fields, submit, wait_for

pytestmark = pytest.mark.slurm
WHOLE_CLUSTER = ("-N4", "--gpus-per-node=8")


def test_plan_order_is_the_order_slurm_starts_jobs_in(slurm_cli, slurm_cluster, tmp_path):
    cancel_all(slurm_cli)
    (slurm_cluster.etc / TABLE_NAME).unlink(missing_ok=True)   # the hook holds nothing
    blocker = submit(slurm_cli, "sleep 6", *WHOLE_CLUSTER, "-o", "/dev/null", tmp=tmp_path)
    wait_for(slurm_cli, blocker, {"RUNNING"})
    ids = [submit(slurm_cli, "sleep 2", *WHOLE_CLUSTER, "-o", "/dev/null",
                  "--comment=synergy:profile=alexnet", tmp=tmp_path) for _ in range(3)]
    # An admin raises the last one above the others (as fair-share or a QOS would rank
    # it). 22.05's priority/basic counts down from 2^32 - 2^16; 26.05's gives every job 1.
    top = max(j.priority for j in SlurmReader(slurm_cli).snapshot().jobs if j.job_id in ids)
    slurm_cli.run("scontrol", ["update", f"JobId={ids[2]}",
                               f"Priority={min(top + 1000, 2**32 - 3)}"])
    snap = SlurmReader(slurm_cli).snapshot()
    pending = [j for j in snap.jobs if j.job_id in ids]
    assert {j.pending for j in pending} == {True}
    # The others keep Slurm's own ranks (by submission on 22.05; equal on 26.05, where
    # ties go by submission, then id).
    assert max(pending, key=lambda j: j.priority).job_id == ids[2]
    now = time.time()
    ours = [s.id for s in get_policy("slurm").order([job_spec(j, now, {}) for j in pending],
                                                    now)]
    fifo = [s.id for s in get_policy("fifo").order([job_spec(j, now, {}) for j in pending],
                                                   now)]
    assert ours[0] == ids[2] and fifo[0] == ids[0]
    for jid in ids:
        wait_for(slurm_cli, jid, {"COMPLETED"}, 90)
    reader = SlurmReader(slurm_cli)
    starts = {jid: job_fields(reader.cli, jid)["StartTime"] for jid in ids}   # ISO, sortable
    assert len(set(starts.values())) == 3          # one at a time: each needs every GPU
    assert sorted(ids, key=starts.__getitem__) == ours, starts


def raw_usage(slurm_cli, account: str) -> int:
    out = subprocess.run(["sshare", "-n", "-P", "-A", account, "-o", "Account,User,RawUsage"],
                         capture_output=True, text=True, env=slurm_cli.env(), check=True).stdout
    return sum(int(f[2]) for f in (line.split("|") for line in out.splitlines())
               if len(f) == 3 and f[1] == "root" and f[2].isdigit())


def test_fair_share_reorders_jobs_and_the_plan_follows(slurm_cli, slurm_cluster, tmp_path):
    fair_share_reorders(slurm_cli, slurm_cluster, tmp_path, WHOLE_CLUSTER)


def fair_share_reorders(slurm_cli, slurm_cluster, tmp_path, whole: tuple[str, ...]) -> None:
    """lab-a has used the cluster, lab-b has not: with multifactor priority Slurm starts
    lab-b's job before lab-a's older one, and the `slurm` policy plans them in that order.
    ``whole``: the options of a job that takes every GPU node."""
    cancel_all(slurm_cli)
    (slurm_cluster.etc / TABLE_NAME).unlink(missing_ok=True)
    base_a, base_b = raw_usage(slurm_cli, "lab-a"), raw_usage(slurm_cli, "lab-b")
    hog = submit(slurm_cli, "sleep 300", *whole, "-A", "lab-a", "-o", "/dev/null",
                 tmp=tmp_path)
    wait_for(slurm_cli, hog, {"RUNNING"})
    # Usage is charged when priority/multifactor recalculates (PriorityCalcPeriod=1 min).
    deadline = time.monotonic() + 150
    while raw_usage(slurm_cli, "lab-a") <= base_a:
        assert time.monotonic() < deadline, "lab-a was never charged for its usage"
        time.sleep(2)
    slurm_cli.run("scancel", [str(hog)])
    blocker = submit(slurm_cli, "sleep 5", *whole, "-A", "lab-a", "-o", "/dev/null",
                     tmp=tmp_path)
    wait_for(slurm_cli, blocker, {"RUNNING"})
    older = submit(slurm_cli, "sleep 1", *whole, "-A", "lab-a", "-o", "/dev/null",
                   "--comment=synergy:profile=alexnet", tmp=tmp_path)
    time.sleep(1)
    newer = submit(slurm_cli, "sleep 1", *whole, "-A", "lab-b", "-o", "/dev/null",
                   "--comment=synergy:profile=alexnet", tmp=tmp_path)
    assert raw_usage(slurm_cli, "lab-b") == base_b
    snap = SlurmReader(slurm_cli).snapshot()
    pending = {j.job_id: j for j in snap.jobs if j.job_id in (older, newer)}
    assert pending[newer].priority > pending[older].priority, pending
    now = time.time()
    specs = [job_spec(j, now, {}) for j in pending.values()]
    assert [s.id for s in get_policy("slurm").order(specs, now)] == [newer, older]
    assert [s.id for s in get_policy("fifo").order(specs, now)] == [older, newer]
    for jid in (older, newer):
        wait_for(slurm_cli, jid, {"COMPLETED"}, 90)
    reader = SlurmReader(slurm_cli)
    assert job_fields(reader.cli, newer)["StartTime"] < job_fields(reader.cli, older)["StartTime"]
