"""The one rule for what synergy changes about a job, checked on every kind of request
against each part that applies it: the hook (its Python side, which the parity tests hold
to the Lua), the controller's classify and reconcile steps, and whatif's reading of the
same job in an accounting export (its submit line, as sacct keeps it)."""

from __future__ import annotations

import pytest

from synergy_slurm.config import Config, HookSection
from synergy_slurm.controller.actions import (
    RELEASE,
    SHAPE_RELEASE,
    current_shape,
    reconcile_pending,
)
from synergy_slurm.controller.classify import classify
from synergy_slurm.core import Allocation, PerGpu, Plan
from synergy_slurm.decide import (
    Change,
    JobFacts,
    PendingView,
    Step,
    needs_no_hold,
    no_hold_share,
    reconcile,
    what_synergy_changes,
)
from synergy_slurm.hook.export import build_table
from synergy_slurm.hook.rules import decide
from synergy_slurm.hook.sbatch_args import submission_from_args
from synergy_slurm.hook.table import HookTable, TableError, parse_table
from synergy_slurm.profiles import load_profiles
from synergy_slurm.shipped import SHIPPED_PROFILES
from synergy_slurm.slurm.model import SlurmJob
from synergy_slurm.slurm.parse import gpu_count
from synergy_slurm.slurm.sacct import PRIORITY_FIELDS, parse_history_text
from synergy_slurm.vocabulary import GpuRequest
from synergy_slurm.whatif.history import job_change

NOW = 1_800_000_000.0
FAIR = PerGpu(3, 62.5)
# sbatch options -> what synergy changes about that job.
SPECS: list[tuple[list[str], Change]] = [
    (["--gpus=1", "--comment=synergy:profile=res18"], Change.RESHAPE),
    (["--gres=gpu:2", "--comment=synergy:profile=res18"], Change.RESHAPE),
    (["--gpus-per-node=2", "-N", "2", "--comment=synergy:profile=res18"], Change.RESHAPE),
    (["--gpus=1", "--cpus-per-gpu=10", "--comment=synergy:profile=res18"], Change.RESHAPE),
    (["--gpus=1"], Change.RELEASE),
    (["--gpus=2", "--comment=synergy:profile=nobody-knows"], Change.RELEASE),
    (["--gpus=1", "--cpus-per-gpu=10"], Change.RELEASE),
    (["--gpus=1", "--cpus-per-gpu=40", "--mem-per-gpu=8000"], Change.RELEASE),
    (["--gpus=1", "-c", "8"], Change.LEAVE),
    (["--gpus=1", "--mem-per-cpu=1000"], Change.LEAVE),
    (["--gpus=1", "--ntasks-per-node=4"], Change.LEAVE),
    (["--gpus=1", "--exclusive"], Change.LEAVE),
    (["--gpus=1", "--mem=0"], Change.LEAVE),
    (["--gpus-per-task=1", "--comment=synergy:profile=res18"], Change.LEAVE),
    (["--gpus-per-socket=1"], Change.LEAVE),
    (["--gpus=4", "-N", "2", "--comment=synergy:profile=res18"], Change.LEAVE),
    (["--gpus=1", "--reservation=maint", "--comment=synergy:profile=res18"], Change.LEAVE),
    (["--gpus=1", "--comment=synergy:off synergy:profile=res18"], Change.LEAVE),
]


def table() -> HookTable:
    return HookTable(generated_at=int(NOW), max_age_s=600, partitions=("gpu",),
                     default_partition="gpu", node_gpus=8, node_cpus=24,
                     node_mem_mb=500_000, profiles={"res18": (9, 100_000)},
                     hold_unknown=True, hold_known=True)


def ids(specs):
    return [" ".join(a) for a, _ in specs]


@pytest.mark.parametrize(("args", "want"), SPECS, ids=ids(SPECS))
def test_the_hook_decides_by_the_one_rule(args, want):
    d = decide(table(), submission_from_args(args), NOW)
    assert d.managed == (want is not Change.LEAVE), d
    if want is Change.RESHAPE:
        assert d.profile_key == "res18" and "shaped from profile" in d.reason
    elif want is Change.RELEASE:
        assert d.cpus_per_gpu is None and d.mem_per_gpu_mb is None and d.hold


def slurm_job(args: list[str], job_id: int = 7) -> SlurmJob:
    """The job as the controller reads it once the hook has tagged it."""
    sub = submission_from_args(args)
    hook = decide(table(), sub, NOW)
    tags = ("synergy.managed=1,synergy.held=1" if hook.managed
            else "synergy.managed=0" + (f",synergy.own={sub.own_shape}" if sub.own_shape
                                        else ""))
    per = {k: (gpu_count(v) or (None,))[0] for k, v in (
        ("gpus_per_job", sub.tres_per_job), ("gpus_per_node", sub.tres_per_node),
        ("gpus_per_task", sub.tres_per_task), ("gpus_per_socket", sub.tres_per_socket))}
    gpus = (per["gpus_per_job"] or (per["gpus_per_node"] or 0) * sub.min_nodes
            or per["gpus_per_task"] or per["gpus_per_socket"] or 0)
    cpg = gpu_count(sub.cpus_per_tres)[0] if sub.cpus_per_tres else None
    mpg = gpu_count(sub.mem_per_tres)[0] if sub.mem_per_tres else None
    return SlurmJob(job_id, "u", "PENDING", "gpu", gpus=gpus, num_nodes=sub.min_nodes,
                    comment=sub.comment, admin_comment=tags,
                    reservation=sub.reservation, priority=0, reason="JobHeldUser",
                    het_job_id=None, cpus_per_gpu=cpg, mem_per_gpu_mb=mpg, **per)


@pytest.mark.parametrize(("args", "want"), SPECS, ids=ids(SPECS))
def test_the_controller_manages_and_releases_by_the_one_rule(args, want):
    job = slurm_job(args)
    assert classify(job, Config(), frozenset()).managed == (want is not Change.LEAVE)
    if want is Change.LEAVE:
        return
    planned = Plan((Allocation(job.job_id, job.gpus, PerGpu(9, 100.0), (("n1", job.gpus),),
                               1.8, "ideal"),))
    unknown = frozenset({job.job_id}) if want is Change.RELEASE else frozenset()
    (act,) = reconcile_pending([job], planned, FAIR, unknown=unknown)
    if want is Change.RELEASE:
        # Released with the shape it has: its own request, else the partition's default.
        assert act.after == current_shape(job, FAIR), act
        assert act.kind == (SHAPE_RELEASE if job.cpus_per_gpu is None else RELEASE)
    else:
        assert act.kind == SHAPE_RELEASE and act.after.cpus_per_gpu == 9


def export_line(args: list[str], job_id: int) -> str:
    """The job's record in ``sacct -P -o PRIORITY_FIELDS,SubmitLine`` (no tags: synergy
    was not running)."""
    job = slurm_job(args, job_id)
    nodes = "n[1-2]" if job.num_nodes > 1 else "n1"
    tres = f"cpu={3 * job.gpus},mem={62500 * job.gpus}M,node={job.num_nodes}," \
           f"billing=1,gres/gpu={job.gpus}"
    comment = next((a.split("=", 1)[1] for a in args if a.startswith("--comment=")), "")
    resv = next((a.split("=", 1)[1] for a in args if a.startswith("--reservation=")), "")
    submit_line = "sbatch " + " ".join(args) + " train.sh"
    row = {"JobIDRaw": str(job_id), "User": "u", "Account": "a", "Partition": "gpu",
           "JobName": "train", "Comment": comment, "State": "COMPLETED",
           "Submit": "2026-11-01T10:00:00", "Eligible": "2026-11-01T10:00:00",
           "Start": "2026-11-01T10:00:00", "End": "2026-11-01T11:00:00",
           "AllocTRES": tres, "ReqTRES": tres, "NodeList": nodes, "QOS": "normal",
           "Priority": "100", "Timelimit": "02:00:00", "AdminComment": "",
           "Reservation": resv, "SubmitLine": submit_line}
    return "|".join(row[f] for f in (*PRIORITY_FIELDS, "Reservation", "SubmitLine"))


def test_whatif_reads_the_same_decision_from_an_export():
    header = "|".join((*PRIORITY_FIELDS, "Reservation", "SubmitLine"))
    lines = [header, *(export_line(a, 100 + i) for i, (a, _) in enumerate(SPECS))]
    jobs, skipped = parse_history_text("\n".join(lines))
    assert not skipped and len(jobs) == len(SPECS)
    for job, (args, want) in zip(jobs, SPECS, strict=True):
        known = "synergy:profile=res18" in " ".join(args)
        assert job_change(job, {}, known).change is want, (args, job)


def test_the_hooks_tags_decide_in_a_window_synergy_ran():
    (job,), _ = parse_history_text("\n".join([
        "|".join(PRIORITY_FIELDS),
        export_line(["--gpus=1"], 5).rsplit("|", 2)[0]]))
    assert job_change(job, {"managed": "0", "own": "cpus-per-task"}, True).change \
        is Change.LEAVE
    assert job_change(job, {"managed": "1"}, True).change is Change.RESHAPE
    assert job_change(job, {"managed": "1"}, False).change is Change.RELEASE


def test_the_rule_in_order():
    base = JobFacts(1, GpuRequest(per_job=1), profile_known=True)
    assert what_synergy_changes(base).change is Change.RESHAPE
    for facts, why in ((JobFacts(0), "not a GPU job"),
                       (JobFacts(1, managed_partition=False), "partition not managed"),
                       (JobFacts(1, user_opted_out=True), "user opted out"),
                       (JobFacts(1, comment="x synergy:off"), "job opted out")):
        d = what_synergy_changes(facts)
        assert d.change is Change.LEAVE and d.reason == why and not d.managed
    # synergy:offline is not synergy:off.
    assert what_synergy_changes(JobFacts(1, comment="synergy:offline")).managed


def test_a_job_slurm_spread_over_nodes_is_judged_by_what_it_asked():
    """--gpus=8 without -N asks for one node at least: the hook reshapes it, though Slurm
    then spread it over two (e2e_whatif on 26.05, whose sacct keeps the submit line, found
    whatif calling it 'over several nodes' and leaving it)."""
    header = "|".join((*PRIORITY_FIELDS, "Reservation", "SubmitLine"))
    line = export_line(["--gpus=8", "--comment=synergy:profile=res18"], 300)
    f = line.split("|")
    f[PRIORITY_FIELDS.index("NodeList")] = "n[1-2]"
    (job,), skipped = parse_history_text(header + "\n" + "|".join(f))
    assert not skipped and job.nodes == ("n1", "n2")
    assert job_change(job, {}, True).change is Change.RESHAPE
    asked_two = export_line(["--gpus=8", "-N", "2", "--comment=synergy:profile=res18"], 301)
    (job2,), _ = parse_history_text(header + "\n" + asked_two)
    assert job_change(job2, {}, True).change is Change.LEAVE


def test_a_job_synergy_requeued_is_not_lowered_before_it_runs_again():
    """On 26.05 a job requeued into 9 cores was lowered to 3 while it waited for the room
    the plan no longer saw, and restarted slower than it had run: the requeue's restart
    was paid for the larger share, so the rule keeps it (raising stays allowed)."""
    nine = PerGpu(9, 62.5)
    assert reconcile(PendingView(False, nine), PerGpu(3, 62.5), True).step is Step.LOWER
    assert reconcile(PendingView(False, nine, requeued=True), PerGpu(3, 62.5), True) is None
    got = reconcile(PendingView(False, nine, requeued=True), PerGpu(12, 125.0), True)
    assert got is not None and got.step is Step.RAISE


def test_while_a_held_job_waits_no_shape_goes_unheld():
    fair = PerGpu(3, 62.5)
    assert no_hold_share(fair, held_waiting=False) == fair
    assert no_hold_share(fair, held_waiting=True) is None
    assert no_hold_share(None, held_waiting=False) is None


def test_a_shape_within_the_proportional_share_needs_no_hold():
    fair = PerGpu(3, 62.5)
    assert needs_no_hold(PerGpu(1, 20.0), fair) and needs_no_hold(PerGpu(3, 62.5), fair)
    assert not needs_no_hold(PerGpu(4, 20.0), fair)          # more cores
    assert not needs_no_hold(PerGpu(1, 63.0), fair)          # more memory


def test_the_hook_table_lists_the_keys_it_does_not_hold(tmp_path):
    # The controller builds the table with the smallest proportional share of its pools:
    # the shipped language models (1 core, 20 GB) and deepspeech (exactly 3 cores,
    # 62.5 GB) are final at submission; the image models and m5 are held on 22.05.
    profiles = load_profiles(SHIPPED_PROFILES)
    table = build_table(HookSection(hold_known=True), profiles, 24, 500000, 8,
                        proportional=PerGpu(3, 62.5))
    assert table.no_hold == {"gnmt", "transformer", "lstm", "deepspeech"}
    back = parse_table(table.render())
    assert back.no_hold == table.no_hold and back.hold_known
    # Where a partition gives 2 cores per GPU, deepspeech's 3 are above it: held.
    assert "deepspeech" not in build_table(HookSection(), profiles, 24, 500000, 8,
                                           proportional=PerGpu(2, 62.5)).no_hold
    # Not known (`hook export` without a cluster): every known key held as configured.
    assert build_table(HookSection(), profiles, 24, 500000, 8).no_hold == frozenset()
    # A no_hold key the table has no profile for is refused.
    with pytest.raises(TableError):
        HookTable(generated_at=1, node_cpus=24, node_mem_mb=500000, node_gpus=8,
                  no_hold=frozenset({"bert"}))
