"""sacctmgr's limit output parsed (recorded lines) and turned into per-job caps."""

from __future__ import annotations

import pytest

from synergy_slurm.controller.limits import Usage, job_limits
from synergy_slurm.core import PerGpu
from synergy_slurm.slurm.commands import SlurmError
from synergy_slurm.slurm.limits import (
    AssocLimits,
    QosLimits,
    SiteLimits,
    Tres,
    parse_assocs,
    parse_qos,
    parse_tres,
)
from synergy_slurm.slurm.model import NodeAlloc, SlurmJob

FAIR = PerGpu(3, 62.5)


@pytest.mark.parametrize("text, want", [
    ("", Tres()),
    ("cpu=16", Tres(16, None)),
    ("cpu=8,mem=100G,gres/gpu=4", Tres(8, 102_400)),
    ("mem=150000M", Tres(None, 150_000)),
    ("mem=1.5T,node=2", Tres(None, 1_572_864)),
    ("billing=10,gres/gpu=2", Tres()),
])
def test_tres(text, want):
    assert parse_tres(text) == want


def test_qos_and_assoc_lines_and_bad_ones_are_skipped_with_a_reason():
    qos, skipped = parse_qos("normal||||\nsyncap||cpu=16||\nbad|cpu=x||\nshort|cpu=1\n")
    assert [q.name for q in qos] == ["normal", "syncap"]
    assert qos[1].per_user == Tres(16, None)
    assert [s.what for s in skipped] == ["qos bad", "qos line 'short|cpu=1'"]
    assocs, skipped = parse_assocs(
        "c|root|||||\nc|lab-a|||mem=100G||\nc|lab-a|alice|||cpu=32\nc|lab-b|bob||cpu=zz||\n")
    assert [(a.account, a.user) for a in assocs] == [("lab-a", ""), ("lab-a", "alice")]
    assert skipped[0].what == "association lab-b/bob"


def sjob(jid, user="alice", account="lab-a", qos="normal", gpus=1, state="PENDING", cpus=0,
         mem_mb=0) -> SlurmJob:
    alloc = (NodeAlloc("n1", cpus, mem_mb, gpus),) if state == "RUNNING" else ()
    return SlurmJob(jid, user, state, "gpu", gpus=gpus, account=account, qos=qos, cpus=cpus,
                    alloc=alloc)


def ask(j: SlurmJob) -> tuple[SlurmJob, Usage]:
    return j, Usage(FAIR.cpus * j.gpus, FAIR.mem_gb * j.gpus * 1000)


def test_a_shared_limit_pays_for_running_jobs_then_splits_the_room_evenly():
    site = SiteLimits((QosLimits("normal", per_user=Tres(cpus=24)),))
    running = [sjob(1, state="RUNNING", cpus=6, gpus=1), sjob(2, user="bob", state="RUNNING",
                                                              cpus=20)]
    a, b = sjob(3, gpus=2), sjob(4, gpus=1)
    caps = job_limits({3: ask(a), 4: ask(b)}, running, site, FAIR)
    # alice: 24 - 6 running - (6 + 3) asked = 9 to share: 6 + 4.5 -> 5/GPU, 3 + 4.5 -> 7.
    assert caps[3].cpus == 5 and caps[4].cpus == 7
    assert caps[3].mem_gb == float("inf")
    # Their raised shares together still fit the limit.
    assert caps[3].cpus * 2 + caps[4].cpus + 6 <= 24


def test_never_below_proportional_and_per_job_limits_apply_directly():
    site = SiteLimits((QosLimits("normal", per_job=Tres(mem_mb=100_000)),),
                      (AssocLimits("c", "lab-a", group=Tres(cpus=4)),))
    caps = job_limits({3: ask(sjob(3, gpus=1))}, [], site, FAIR)
    assert caps[3] == PerGpu(4, 100.0)   # the account may hold 4 cores; 100 GB per job
    caps = job_limits({3: ask(sjob(3, gpus=2))}, [], site, FAIR)
    assert caps[3].cpus == 3             # 4 cores for 2 GPUs is below the floor: the floor


def test_a_users_own_per_job_limit_replaces_the_accounts_and_other_scopes_do_not_mix():
    site = SiteLimits((), (AssocLimits("c", "lab-a", per_job=Tres(cpus=8)),
                           AssocLimits("c", "lab-a", "alice", per_job=Tres(cpus=16))))
    caps = job_limits({3: ask(sjob(3)), 4: ask(sjob(4, user="bob")),
                       5: ask(sjob(5, account="lab-b"))}, [], site, FAIR)
    assert caps[3].cpus == 16 and caps[4].cpus == 8 and 5 not in caps


def test_a_parent_accounts_group_limit_covers_its_sub_accounts_jobs():
    """dept (GrpTRES=cpu=20) is above lab-a and lab-b, as sacctmgr shows it (recorded on the
    dev cluster, ParentName last); root is above dept. A running lab-b job holds 8 of dept's
    cores: a lab-a job (2 GPUs, asking the proportional 6) may grow into 20 - 8 - 6 = 6 more:
    6 cores per GPU. A per-job limit set on dept applies to lab-a's jobs (inherited), the
    user's own replaces it."""
    assocs, skipped = parse_assocs(
        "synergydev|root|||||\nsynergydev|root|root||||\n"
        "synergydev|dept|||cpu=20|cpu=10|root\nsynergydev|lab-a|||||dept\n"
        "synergydev|lab-a|alice||||\nsynergydev|lab-b|||||dept\n"
        "synergydev|lab-b|bob||||\nsynergydev|other|||||root\n")
    assert skipped == []
    site = SiteLimits((), tuple(assocs))
    assert site.accounts_above("lab-a") == ["lab-a", "dept", "root"]
    running = [sjob(1, user="bob", account="lab-b", state="RUNNING", cpus=8)]
    caps = job_limits({3: ask(sjob(3, gpus=2))}, running, site, FAIR)
    assert caps[3].cpus == 5         # min(dept's room: (20 - 8 - 6 + 6) / 2 = 6, per job 10/2)
    caps = job_limits({4: ask(sjob(4, account="other"))}, running, site, FAIR)
    assert 4 not in caps             # not under dept
    own = SiteLimits((), (*assocs, AssocLimits("c", "lab-a", "alice", per_job=Tres(cpus=16))))
    caps = job_limits({3: ask(sjob(3, gpus=1))}, [], own, FAIR)
    assert caps[3].cpus == 16        # alice's own per-job limit, not dept's 10
    # A loop in a malformed tree ends the walk.
    loop = SiteLimits((), (AssocLimits("c", "x", parent="y"), AssocLimits("c", "y", parent="x")))
    assert loop.accounts_above("x") == ["x", "y"]


class FlakyCLI:
    """sacctmgr that answers once, then fails (slurmdbd restarting)."""

    def __init__(self, answers: list[str | None]) -> None:
        self.answers = answers

    def run(self, command, args, timeout_s=None, input_text=None):
        assert command == "sacctmgr" and args[:3] == ["-n", "-P", "show"]
        answer = self.answers.pop(0)
        if answer is None:
            raise SlurmError("sacctmgr: error: Problem talking to the database")
        return answer


def test_a_failed_read_uses_the_last_limits_and_none_without_accounting():
    from synergy_slurm.slurm.reader import SlurmReader

    reader = SlurmReader(FlakyCLI(["syncap||cpu=16||\n", "", None]))
    first = reader.limits()
    assert first is not None and first.qos_named("syncap").per_user == Tres(16, None)
    assert reader.limits() is first            # slurmdbd away: the last limits, not none
    assert SlurmReader(FlakyCLI([None])).limits() is None     # no accounting at all
