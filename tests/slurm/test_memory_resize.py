"""Lowering a running job's memory (26.05) is asynchronous: slurmctld answers the update at
once, marks the job RESIZING and changes the allocation only when every node's slurmd has
answered. The writer waits for that and calls the change ignored only after its timeout
(seen in CI on a loaded 2-core machine: the allocation read straight after the update still
showed the old memory)."""

from __future__ import annotations

import pytest

from synergy_slurm.slurm.commands import SlurmCLI, SlurmError
from synergy_slurm.slurm.model import NodeAlloc, SlurmJob
from synergy_slurm.slurm.writer import ChangeIgnored, SlurmWriter, Unsupported

from .helpers import squeue_fields_answer


class SlowResize(SlurmCLI):
    """scontrol that shows the new memory only after ``answers_after`` reads."""

    def __init__(self, answers_after: int) -> None:
        super().__init__()
        self.answers_after = answers_after
        self.reads = 0
        self.sent: list[list[str]] = []

    def run(self, command, args, timeout_s=None, input_text=None):  # type: ignore[override]
        if command == "squeue":
            self.reads += 1
            mem = "20830M" if self.reads > self.answers_after else "480000M"
            state = "RUNNING" if self.reads > self.answers_after else "RUNNING+RESIZING"
            return squeue_fields_answer(
                args, JobId="35", JobState=state,
                AllocTRES=f"cpu=1,mem={mem},node=1,billing=1,gres/gpu=1")
        self.sent.append(list(args))
        return ""


def big_job() -> SlurmJob:
    return SlurmJob(35, "u", "RUNNING", "gpu", gpus=1, gpus_per_job=1, cpus_per_gpu=1,
                    nodes=("n1",), alloc=(NodeAlloc("n1", 1, 480000, 1),))


def test_the_writer_waits_for_the_nodes_to_answer():
    cli = SlowResize(answers_after=3)
    SlurmWriter(cli, enforce=True, poll_s=0.01).lower_running_memory(big_job(), 20830)
    assert cli.sent == [["update", "JobId=35", "MinMemoryNode=20830"]]
    assert cli.reads == 4


def test_a_resize_that_never_shows_is_reported_ignored_after_the_timeout():
    cli = SlowResize(answers_after=10**9)
    writer = SlurmWriter(cli, enforce=True, poll_s=0.01)
    with pytest.raises(ChangeIgnored, match=r"asked 20830 MB per node.*mem=480000M"):
        writer.lower_running_memory(big_job(), 20830, timeout_s=0.05)
    assert cli.reads >= 2


def test_a_resize_a_node_refused_is_reported_at_once():
    """cgroup v1 refuses a limit below what the job uses: slurmd says so, Slurm keeps the
    allocation and writes the failure as the job's reason (seen on 26.05.5)."""

    class Refused(SlowResize):
        def run(self, command, args, timeout_s=None, input_text=None):  # type: ignore[override]
            if command == "squeue":
                self.reads += 1
                return squeue_fields_answer(
                    args, JobId="35", JobState="RUNNING",
                    Reason="Memory resize to 20830MB failed on node n1",
                    AllocTRES="cpu=1,mem=480000M,node=1,billing=1,gres/gpu=1")
            return super().run(command, args, timeout_s, input_text)

    cli = Refused(answers_after=10**9)
    with pytest.raises(ChangeIgnored, match="failed_on_node_n1"):
        SlurmWriter(cli, enforce=True, poll_s=0.01).lower_running_memory(big_job(), 20830,
                                                                          timeout_s=30)
    assert cli.reads == 1


class Refuses(SlurmCLI):
    """scontrol update that fails with ``stderr``."""

    def __init__(self, stderr: str) -> None:
        super().__init__()
        self.stderr = stderr

    def run(self, command, args, timeout_s=None, input_text=None):  # type: ignore[override]
        raise SlurmError(f"scontrol update failed (1): {self.stderr}", ["scontrol", *args], 1,
                         self.stderr)


def test_a_job_without_an_extern_step_is_unsupported_and_a_passing_failure_is_not():
    """Slurm refuses a job started before PrologFlags=Contain for good: the writer says
    Unsupported (the controller stops asking for that job); any other failure stays a
    SlurmError (asked again next round)."""
    writer = SlurmWriter(Refuses("Requested operation requires extern step"), enforce=True)
    with pytest.raises(Unsupported, match="extern step"):
        writer.lower_running_memory(big_job(), 20830)
    writer = SlurmWriter(Refuses("Socket timed out on send/recv operation"), enforce=True)
    with pytest.raises(SlurmError, match="timed out") as err:
        writer.lower_running_memory(big_job(), 20830)
    assert not isinstance(err.value, Unsupported)
