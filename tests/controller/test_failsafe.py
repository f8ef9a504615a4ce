"""Releasing the jobs the hook held (the controller's stop and `synergy hook failsafe`
share it), on the shipped fake Slurm."""

from __future__ import annotations

import pytest

from synergy_slurm.controller.failsafe import release_held
from synergy_slurm.slurm.commands import SlurmError
from synergy_slurm.slurm.fake import FakeReader, FakeWriter
from synergy_slurm.slurm.model import SlurmJob, Snapshot

HELD = "synergy.managed=1,synergy.held=1"


RELEASED = "synergy.managed=1,synergy.held=0"


def job(job_id: int, admin: str, priority: int = 0, reason: str = "JobHeldUser") -> SlurmJob:
    return SlurmJob(job_id, user="alice", state="PENDING", partition="gpu", gpus=1,
                    priority=priority, admin_comment=admin, reason=reason)


SNAP = Snapshot((job(1, HELD), job(2, ""), job(3, HELD), job(4, HELD, priority=5),
                 job(5, RELEASED), job(6, HELD, reason="JobHeldAdmin")), (), (), "22.05.8")


def test_only_jobs_synergy_held_are_released_and_their_tag_cleared():
    writer = FakeWriter()
    done = release_held(FakeReader(SNAP), writer)
    assert done.held == done.released == [1, 3] and done.failed == {}
    assert writer.calls == [("release", 1), ("untag", 1), ("release", 3), ("untag", 3)]


def test_an_admins_hold_and_a_hold_after_synergys_release_are_left_alone():
    """5: synergy released it once (tag cleared), then its user or an admin held it;
    6: an admin held a job the hook still held. Neither is synergy's to release."""
    done = release_held(FakeReader(SNAP), FakeWriter())
    assert 5 not in done.held and 6 not in done.held


def test_a_dry_run_lists_them_and_sends_nothing():
    writer = FakeWriter(enforce=False)
    done = release_held(FakeReader(SNAP), writer, dry_run=True)
    assert done.held == [1, 3] and done.released == [] and writer.calls == []


def test_one_refusal_does_not_stop_the_others():
    writer = FakeWriter(fail=frozenset({"release"}))
    done = release_held(FakeReader(SNAP), writer)
    assert done.released == [] and set(done.failed) == {1, 3}
    assert "simulated release failure" in done.failed[1]


def test_an_unreadable_slurm_is_an_error_for_the_caller():
    with pytest.raises(SlurmError):
        release_held(FakeReader(SlurmError("slurmctld down")), FakeWriter())
