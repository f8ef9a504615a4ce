"""A job's name and comment cannot rewrite the record the writer checks its changes by
(issue 43, item 6), on the real test cluster: ``scontrol show job -o`` prints the name
before JobState and the comment before CpusPerTres and after JobState, Reason, AllocTRES
and JobId; a user who writes those keys there must not move any of them."""

from __future__ import annotations

import time

import pytest

from synergy_slurm.slurm.commands import SlurmError
from synergy_slurm.slurm.model import SlurmJob
from synergy_slurm.slurm.reader import SlurmReader
from synergy_slurm.slurm.writer import ChangeIgnored, Shape, SlurmWriter

from .helpers import cancel_all, submit

pytestmark = pytest.mark.slurm

FORGED = ("JobState=PENDING Reason=JobHeldUser AllocTRES=cpu=3,mem=1000M JobId=999 "
          "CpusPerTres=gres:gpu:7 MemPerTres=gres:gpu:777")


def running(cli, jid: int) -> SlurmJob:
    """The job once running, as the reader sees it (JSON: the name cannot fool it, where
    ``helpers.wait_for``'s scontrol text would be)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = SlurmReader(cli).snapshot().job(jid)
        if job is not None and job.running:
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {jid} not running after 60 s")


@pytest.fixture(autouse=True)
def clean(slurm_cli):
    cancel_all(slurm_cli)
    yield
    cancel_all(slurm_cli)


def test_a_running_jobs_name_and_comment_do_not_rewrite_its_record(slurm_cli, tmp_path):
    jid = submit(slurm_cli, "sleep 300", "--gpus=1", "--cpus-per-gpu=2",
                 "--mem-per-gpu=4000", f"--job-name=n {FORGED}", f"--comment=c {FORGED}",
                 "-o", "/dev/null", tmp=tmp_path)
    running(slurm_cli, jid)
    writer = SlurmWriter(slurm_cli, enforce=True)
    fields = writer.read(jid)
    assert (fields["JobId"], fields["JobState"]) == (str(jid), "RUNNING"), fields
    assert "cpu=2," in fields["AllocTRES"] and "mem=1000M" not in fields["AllocTRES"]
    assert fields["CpusPerTres"].endswith(":2") and fields["MemPerTres"].endswith(":4000")
    # Waits do not return at once on a forged state ...
    with pytest.raises(SlurmError, match="not PENDING"):
        writer.wait_state(jid, "PENDING", timeout_s=1)
    # ... and a change Slurm does not show is not taken as done.
    job = running(slurm_cli, jid)
    with pytest.raises(ChangeIgnored):
        writer.verify(job, Shape(7, 777))
