"""A whole controller round without Slurm: a reader of hand-made snapshots, a writer that
records what it is asked to do, the state in memory. Modes, shaping, stray releases,
requeue decisions (and their minimum interval), failures, state and audit."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from synergy_slurm.config import config_from_dict
from synergy_slurm.controller.audit import AuditLog
from synergy_slurm.controller.daemon import LIMITS_MAX_AGE_S, Controller, RoundFailed
from synergy_slurm.controller.observe import pools
from synergy_slurm.controller.outcome import ActionOutcome, Result
from synergy_slurm.controller.state import StateStore
from synergy_slurm.hook.table import TABLE_NAME, parse_table
from synergy_slurm.slurm.commands import SlurmError
from synergy_slurm.slurm.fake import FakeReader, FakeWriter
from synergy_slurm.slurm.limits import QosLimits, SiteLimits, Tres
from synergy_slurm.slurm.model import NodeAlloc, SlurmJob, SlurmNode, SlurmPartition, Snapshot
from synergy_slurm.slurm.release import Release
from synergy_slurm.slurm.writer import Shape, Unsupported

NOW = 1_800_000_000.0


def node(name="n1", alloc_cpus=0, alloc_gpus=0, alloc_mem_mb=0) -> SlurmNode:
    return SlurmNode(name, cpus=24, mem_mb=500_000, gpus=8, alloc_cpus=alloc_cpus,
                     alloc_gpus=alloc_gpus, alloc_mem_mb=alloc_mem_mb, state="idle",
                     partitions=("gpu",))


def job(job_id: int, **kw) -> SlurmJob:
    base = dict(user="alice", state="PENDING", partition="gpu", gpus=1, gpus_per_job=1,
                priority=0, reason="JobHeldUser", submit_time=int(NOW) - 60,
                comment="synergy:profile=alexnet",
                admin_comment="synergy.managed=1,synergy.profile=alexnet,synergy.held=1")
    base.update(kw)
    return SlurmJob(job_id, **base)


def snapshot(*jobs: SlurmJob, nodes=None, **limits) -> Snapshot:
    return Snapshot(tuple(jobs), tuple(nodes or [node()]),
                    (SlurmPartition("gpu", ("n1",), 3, 62500, True, **limits),), "22.05.8")


def controller(tmp_path, paper_profiles_path, snap, mode="enforce", fail=frozenset(),
               **controller_keys) -> tuple[Controller, FakeWriter]:
    doc = {"hook": {"dir": str(tmp_path), "state_dir": str(tmp_path)},
           "profiles": {"file": str(paper_profiles_path), "store": str(tmp_path / "p.db")},
           "controller": {"mode": mode, "state_db": str(tmp_path / "state.db"),
                          "audit_log": str(tmp_path / "audit.jsonl"),
                          "restart_cost_s": 10.0, "requeue_min_interval_s": 1800.0,
                          **controller_keys}}
    cfg = config_from_dict(doc)
    writer = FakeWriter(enforce=mode == "enforce", fail=fail)
    ctl = Controller(cfg, clock=lambda: NOW, reader=FakeReader(snap), writer=writer,
                     state=StateStore(":memory:"), audit=AuditLog(tmp_path / "audit.jsonl"))
    return ctl, writer


def audit(tmp_path) -> list[dict]:
    return [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]


def test_enforce_shapes_and_releases_a_held_job_and_records_it(tmp_path, profiles_path):
    ctl, writer = controller(tmp_path, profiles_path, snapshot(job(5)))
    res = ctl.run_round()
    assert writer.calls == [("reshape", 5, Shape(12, 125000)), ("release", 5), ("untag", 5)]
    assert res.results == {5: ActionOutcome(Result.DONE)} and res.errors == 0 and res.managed == 1
    row = ctl.state.jobs()[0]
    assert (row["job_id"], row["planned_cpus"], row["planned_mem_mb"]) == (5, 12, 125000)
    assert row["profile_key"] == "alexnet" and row["speedup"] == pytest.approx(2.94)
    last = ctl.state.last_round()
    assert last["managed"] == 1 and last["actions"] == 1 and last["error"] is None
    (line,) = audit(tmp_path)
    assert (line["job_id"], line["action"], line["result"], line["mode"]) == (
        5, "shape-release", "done", "enforce")
    # Enforcing, it published the hook table (the heartbeat's content).
    assert parse_table((tmp_path / TABLE_NAME).read_text()).profiles["alexnet"] == (12, 125000)


def test_observe_plans_and_records_but_sends_nothing(tmp_path, profiles_path):
    ctl, writer = controller(tmp_path, profiles_path, snapshot(job(5)), mode="observe")
    res = ctl.run_round()
    assert writer.calls == []
    assert res.results == {5: ActionOutcome(Result.PLANNED)}
    assert audit(tmp_path)[0]["result"] == "planned (observe)"
    assert ctl.state.jobs()[0]["planned_cpus"] == 12
    assert not (tmp_path / TABLE_NAME).exists()       # only an enforcing controller holds


@pytest.mark.parametrize("mode, calls", [("enforce", [("untag", 7)]), ("observe", [])])
def test_a_job_released_by_someone_else_loses_synergys_held_tag(tmp_path, profiles_path,
                                                                 mode, calls):
    """Its user released the hook's hold early and it runs: the tag goes (enforce only),
    so a later hold of the user's is never taken for synergy's (issue 43, item 3)."""
    ran = job(7, state="RUNNING", priority=100, reason="None", nodes=("n1",),
              alloc=(NodeAlloc("n1", 3, 62500, 1),))
    ctl, writer = controller(tmp_path, profiles_path, snapshot(ran), mode=mode)
    ctl.run_round()
    assert [c for c in writer.calls if c[0] == "untag"] == calls


def test_a_held_job_it_does_not_manage_is_released(tmp_path, profiles_path):
    stray = job(6, gpus_per_job=None, gpus_per_task=1, gpus=2, num_tasks=2, comment="")
    ctl, writer = controller(tmp_path, profiles_path, snapshot(stray))
    res = ctl.run_round()
    assert writer.calls == [("release", 6), ("untag", 6)]
    assert res.skipped[6].startswith("--gpus-per-task")
    assert "not managed" in audit(tmp_path)[0]["reason"]


def test_a_failed_shape_still_releases_and_counts_an_error(tmp_path, profiles_path):
    ctl, writer = controller(tmp_path, profiles_path, snapshot(job(5)), fail={"reshape"})
    res = ctl.run_round()
    assert writer.calls == [("reshape", 5, Shape(12, 125000)), ("release", 5), ("untag", 5)]
    assert res.errors == 1 and str(res.results[5]).startswith("error: simulated reshape")


def test_requeue_when_it_pays_then_not_again_within_the_interval(tmp_path, profiles_path):
    running = job(7, state="RUNNING", priority=1, reason="None", cpus_per_gpu=3,
                  mem_per_gpu_mb=62500, requeue=True, start_time=int(NOW) - 600,
                  time_limit_s=24 * 3600, nodes=("n1",),
                  alloc=(NodeAlloc("n1", cpus=3, mem_mb=62500, gpus=1),),
                  comment="synergy:profile=alexnet synergy:requeue-ok", admin_comment="")
    snap = snapshot(running, nodes=[node(alloc_cpus=3, alloc_gpus=1, alloc_mem_mb=62500)])
    ctl, writer = controller(tmp_path, profiles_path, snap)
    ctl.run_round()
    assert writer.calls == [("requeue", 7, Shape(12, 125000))]
    assert ctl.state.last_requeues() == {7: NOW}
    writer.calls.clear()
    ctl.run_round()                     # same cluster, same clock: within 1800 s
    assert writer.calls == []


def test_a_failed_read_records_the_round_and_raises(tmp_path, profiles_path):
    ctl, writer = controller(tmp_path, profiles_path, SlurmError("slurmctld down"))
    with pytest.raises(RoundFailed):
        ctl.run_round()
    assert ctl.state.last_round()["error"] == "slurmctld down"
    assert writer.calls == []
    assert not ctl.heartbeat.beat()     # a failed round stops the heartbeat


@pytest.mark.parametrize("policy, first", [("slurm", 2), ("fifo", 1)])
def test_the_plan_follows_slurms_priority_by_default(tmp_path, profiles_path, policy, first):
    # Three released jobs that each fill the node: only one can be planned. Slurm ranks
    # job 2 first (fair-share, QOS, ... as multifactor would); FIFO would plan job 1.
    jobs = [job(i, gpus=8, gpus_per_job=8, priority=p, reason="Priority",
                submit_time=int(NOW) - 100 + i, admin_comment="synergy.managed=1")
            for i, p in ((1, 10), (2, 30), (3, 20))]
    keys = {} if policy == "slurm" else {"policy": policy}     # slurm is the default
    ctl, _ = controller(tmp_path, profiles_path, snapshot(*jobs), **keys)
    ctl.run_round()
    planned = [r["job_id"] for r in ctl.state.jobs() if r["planned_cpus"] is not None]
    assert planned == [first]


def test_partition_limits_cap_every_shape(tmp_path, profiles_path):
    # alexnet wants 12 cores and 125 GB per GPU; the partition allows a job 16 cores and
    # 200 GB per node, so 2 GPUs get at most 8 cores and 100 GB each (never a shape Slurm
    # would leave pending for ever), and the hook's table is capped the same way.
    two = job(5, gpus=2, gpus_per_job=2)
    snap = snapshot(two, max_cpus_per_node=16, max_mem_per_node_mb=200_000)
    ctl, writer = controller(tmp_path, profiles_path, snap)
    ctl.run_round()
    (call,) = [c for c in writer.calls if c[0] == "reshape"]
    shape = call[2]
    assert shape.cpus_per_gpu * 2 <= 16 and shape.mem_per_gpu_mb * 2 <= 200_000
    assert shape.cpus_per_gpu > 3                       # still above the proportional 3
    table = parse_table((tmp_path / TABLE_NAME).read_text())
    assert (table.node_cpus, table.node_mem_mb) == (16, 200_000)


def test_a_qos_limit_caps_what_a_held_job_is_shaped_to(tmp_path, profiles_path):
    """alexnet wants 12 cores/GPU; bob already runs 10 cores in the QOS that lets a user
    hold 20: the held 1-GPU job gets 10 at most (here exactly: alexnet rises all the way)."""
    running = job(1, user="bob", state="RUNNING", reason="None", priority=100, qos="normal",
                  cpus=10, alloc=(NodeAlloc("n1", 10, 62500, 1),), admin_comment="")
    held = job(5, user="bob", qos="normal")
    site = SiteLimits((QosLimits("normal", per_user=Tres(cpus=20)),))
    snap = snapshot(running, held, nodes=[node(alloc_cpus=10, alloc_gpus=1,
                                                alloc_mem_mb=62500)])
    ctl, writer = controller(tmp_path, profiles_path, snap)
    ctl.reader.site = site
    ctl.run_round()
    assert writer.calls[0] == ("reshape", 5, Shape(10, 125000))
    # Without the limit it would have been 12 cores: the cap, not the profile, stopped it.
    ctl, writer = controller(tmp_path / "b", profiles_path, snap)
    ctl.run_round()
    assert writer.calls[0] == ("reshape", 5, Shape(12, 125000))


def test_the_site_limits_are_read_once_per_max_age_and_again_after_sighup(tmp_path,
                                                                          profiles_path):
    """Two sacctmgr calls to slurmdbd per read: a round within LIMITS_MAX_AGE_S of the last
    read plans with the limits it has; an older one, or the round after refresh (SIGHUP),
    reads them again and applies what changed."""
    held = job(5, user="bob", qos="normal")
    ctl, writer = controller(tmp_path, profiles_path, snapshot(held))
    now = [NOW]
    ctl.clock = lambda: now[0]
    reads = []
    fake_limits = ctl.reader.limits
    ctl.reader.limits = lambda: reads.append(now[0]) or fake_limits()
    ctl.reader.site = SiteLimits((QosLimits("normal", per_job=Tres(cpus=8)),))
    ctl.run_round()
    assert writer.calls[0] == ("reshape", 5, Shape(8, 125000))
    ctl.reader.site = None                          # the admin lifts the limit
    now[0] += LIMITS_MAX_AGE_S - 1
    ctl.run_round()
    assert writer.calls[-3] == ("reshape", 5, Shape(8, 125000)) and reads == [NOW]
    now[0] += 1
    ctl.run_round()
    assert writer.calls[-3] == ("reshape", 5, Shape(12, 125000)) and len(reads) == 2
    ctl.reader.site = SiteLimits((QosLimits("normal", per_job=Tres(cpus=8)),))
    ctl.refresh()
    ctl.run_round()
    assert writer.calls[-3] == ("reshape", 5, Shape(8, 125000)) and len(reads) == 3


@pytest.mark.parametrize("release, kind", [("22.05.8", "cannot"), ("26.05.5", "lower")])
def test_a_job_shaped_past_a_new_limit_is_lowered_where_slurm_allows(tmp_path, profiles_path,
                                                                     release, kind):
    """The hook shaped alexnet to 12 cores/GPU; a QOS now lets bob use 8 per job and Slurm
    holds the job on the limit. 26.05 honours lowering a seen job, so the controller plans
    it under the cap and lowers it; 22.05 would ignore that, so it records why not."""
    shaped = job(5, user="bob", qos="normal", priority=100, reason="QOSMaxCpuPerJobLimit",
                 cpus_per_gpu=12, mem_per_gpu_mb=125000,
                 admin_comment="synergy.managed=1,synergy.profile=alexnet")
    site = SiteLimits((QosLimits("normal", per_job=Tres(cpus=8)),))
    ctl, writer = controller(tmp_path, profiles_path, snapshot(shaped))
    ctl.reader.site, ctl.reader.release = site, Release.parse(release)
    res = ctl.run_round()
    (action,) = res.actions
    assert action.kind == kind and action.before == Shape(12, 125000)
    if kind == "lower":
        assert action.after == Shape(8, 125000)
        assert writer.calls == [("reshape", 5, Shape(8, 125000))]
    else:
        assert "QOSMaxCpuPerJobLimit" in action.reason and writer.calls == []


def test_each_partition_is_planned_with_its_own_share_and_shared_nodes_count_once(
        tmp_path, profiles_path):
    """Partition 'small' (n1, 2 cores/GPU) and 'big' (n1 and n2, 6 cores/GPU). An 8-GPU
    res50 job in 'small' fills n1 in the first pool's plan; the 8-GPU gnmt job in 'big'
    would fit n1 too (1 core/GPU) but finds it taken and goes to n2."""
    n1, n2 = node("n1"), SlurmNode("n2", cpus=96, mem_mb=2_000_000, gpus=8, state="idle",
                                   partitions=("big",))
    n1 = SlurmNode("n1", cpus=24, mem_mb=500_000, gpus=8, state="idle",
                   partitions=("small", "big"))
    res50 = dict(comment="synergy:profile=res50",
                 admin_comment="synergy.managed=1,synergy.profile=res50,synergy.held=1")
    gnmt = dict(comment="synergy:profile=gnmt",
                admin_comment="synergy.managed=1,synergy.profile=gnmt,synergy.held=1")
    jobs = (job(1, partition="small", gpus=8, gpus_per_job=8, **res50),
            job(2, partition="big", gpus=8, gpus_per_job=8, **gnmt))
    snap = Snapshot(jobs, (n1, n2), (SlurmPartition("small", ("n1",), 2, 50_000, True),
                                     SlurmPartition("big", ("n1", "n2"), 6, 100_000)),
                    "22.05.8")
    ctl, writer = controller(tmp_path, profiles_path, snap)
    ctl.cfg = config_from_dict({**_doc(ctl), "hook": {"dir": str(tmp_path),
                                                      "state_dir": str(tmp_path),
                                                      "partitions": ["small", "big"],
                                                      "default_partition": "small"}})
    plan, _ = ctl._plan_pools(snap, pools(snap, ctl.cfg), list(jobs), ctl.profiles(), False, False,
                              NOW)
    where = {a.job_id: a.placement for a in plan.allocations}
    assert where == {1: (("n1", 8),), 2: (("n2", 8),)}     # n1 is small's now
    by_id = plan.by_job()
    # small's job: at most n1's 3 cores per GPU (res50 wants 4), above small's share of 2.
    assert by_id[1].share.cpus == 3 and by_id[2].share.cpus >= 1
    ctl.run_round()
    shapes = {c[1]: c[2] for c in writer.calls if c[0] == "reshape"}
    assert shapes[1].cpus_per_gpu == 3


def _doc(ctl) -> dict:
    c = ctl.cfg
    return {"profiles": {"file": c.profiles.file, "store": c.profiles.store},
            "controller": {"mode": c.controller.mode, "state_db": c.controller.state_db,
                           "audit_log": c.controller.audit_log}}


def test_a_typed_request_is_planned_on_nodes_of_its_type(tmp_path, profiles_path):
    """'all' holds an A100 node (a1, listed first) and an H100 node (h1): a job asking for
    h100 GPUs is planned on h1, an untyped one may go anywhere (a1 here)."""
    a1 = SlurmNode("a1", cpus=64, mem_mb=512_000, gpus=4, state="idle", partitions=("all",),
                   gpu_type="a100")
    h1 = SlurmNode("h1", cpus=96, mem_mb=2_000_000, gpus=8, state="idle",
                   partitions=("all",), gpu_type="h100")
    typed = job(1, partition="all", gpus=2, gpus_per_job=2, gpu_type="h100")
    plain = job(2, partition="all", gpus=2, gpus_per_job=2)
    snap = Snapshot((typed, plain), (a1, h1), (SlurmPartition("all", ("a1", "h1"), 8, 64_000,
                                                              True),), "22.05.8")
    ctl, _ = controller(tmp_path, profiles_path, snap)
    ctl.cfg = config_from_dict({**_doc(ctl), "hook": {"dir": str(tmp_path),
                                                      "state_dir": str(tmp_path),
                                                      "partitions": ["all"],
                                                      "default_partition": "all"}})
    plan, _ = ctl._plan_pools(snap, pools(snap, ctl.cfg), [typed, plain], ctl.profiles(),
                              False, False, NOW)
    where = {a.job_id: a.placement for a in plan.allocations}
    assert where == {1: (("h1", 2),), 2: (("a1", 2),)}


def running_at(job_id: int, key: str, mem_mb: int, node_name: str = "n1") -> SlurmJob:
    return job(job_id, state="RUNNING", reason="None", priority=1, cpus_per_gpu=3,
               mem_per_gpu_mb=62500, start_time=int(NOW) - 600, comment=f"synergy:profile={key}",
               admin_comment=f"synergy.managed=1,synergy.profile={key}",
               nodes=(node_name,), alloc=(NodeAlloc(node_name, 3, mem_mb, 1),))


def measured(ctl: Controller, peaks_mb: dict[int, float]) -> None:
    """The closed loop reads every round, and sstat says each job's peak memory so far."""
    from synergy_slurm.slurm.sstat import JobUse

    ctl.cfg = replace(ctl.cfg, usage=replace(ctl.cfg.usage, every_rounds=1))
    ctl.reader.used = {j: JobUse(str(j), 60.0, mb) for j, mb in peaks_mb.items()}


@pytest.mark.parametrize("release, enabled, shrinks", [
    ("26.05.5", True, True), ("26.05.5", False, False), ("24.11.5", True, False),
    ("22.05.8", True, False)])
def test_a_running_jobs_unneeded_memory_is_lowered_where_slurm_can(
        tmp_path, profiles_path, caplog, release, enabled, shrinks):
    """gnmt runs as fast with 20.83 GB per GPU as with its partition's 62.5: on 26.05 its
    memory is lowered in place (unless the config says no); alexnet needs its 62.5 GB (at
    3 cores, 0.1x with less) and keeps it; earlier releases cannot, and say so once."""
    snap = snapshot(running_at(1, "gnmt", 62500), running_at(2, "alexnet", 62500),
                    nodes=[node(alloc_cpus=6, alloc_gpus=2, alloc_mem_mb=125000)])
    ctl, writer = controller(tmp_path, profiles_path, snap, shrink_running_memory=enabled)
    ctl.reader = FakeReader(snap, release=release)
    measured(ctl, {1: 2000.0, 2: 2000.0})
    with caplog.at_level("INFO"):
        res = ctl.run_round()
        ctl.run_round()
    shrunk = [a for a in res.actions if a.kind == "shrink-memory"]
    if shrinks:
        assert [(a.job_id, a.before, a.after) for a in shrunk] == [
            (1, Shape(3, 62500), Shape(3, 20830))]
        assert ("shrink", 1, 20830) in writer.calls
        assert not any(c[0] == "shrink" and c[1] == 2 for c in writer.calls)
        assert any(r["action"] == "shrink-memory" and r["result"] == "done"
                   for r in audit(tmp_path))
    else:
        assert shrunk == [] and not any(c[0] == "shrink" for c in writer.calls)
    said = [r.getMessage() for r in caplog.records if "running jobs' memory" in r.getMessage()]
    assert len(said) == 1 and ("lowered in place" in said[0]) is shrinks


def test_a_running_job_is_lowered_only_once_measured_and_never_below_its_peak(
        tmp_path, profiles_path):
    """Where memory limits bite a job lowered below what it really uses is killed, and its
    profile is no proof: gnmt's profile says 20.83 GB per GPU, but until the closed loop
    has read its use nothing is lowered; measured at a 30 GB peak it is lowered to 37.5
    GB ([usage] headroom 1.25), not to 20.83."""
    snap = snapshot(running_at(1, "gnmt", 62500),
                    nodes=[node(alloc_cpus=3, alloc_gpus=1, alloc_mem_mb=62500)])
    ctl, writer = controller(tmp_path, profiles_path, snap)
    ctl.reader = FakeReader(snap, release="26.05.5")
    res = ctl.run_round()                              # round 1: use not read yet
    assert [a for a in res.actions if a.kind == "shrink-memory"] == []
    measured(ctl, {1: 30000.0})
    res = ctl.run_round()
    (act,) = [a for a in res.actions if a.kind == "shrink-memory"]
    assert act.after == Shape(3, 37500) and ("shrink", 1, 37500) in writer.calls
    measured(ctl, {1: 55000.0})                        # too close to what it holds
    writer.calls.clear()
    res = ctl.run_round()
    assert [a for a in res.actions if a.kind == "shrink-memory"] == []


def test_a_running_job_lowered_before_reads_as_what_it_holds(tmp_path, profiles_path):
    """After the shrink Slurm still shows MemPerTres=gpu:62500; the allocation (20830 MB)
    is what the job holds: nothing more to do."""
    snap = snapshot(running_at(1, "gnmt", 20830),
                    nodes=[node(alloc_cpus=3, alloc_gpus=1, alloc_mem_mb=20830)])
    ctl, _ = controller(tmp_path, profiles_path, snap)
    ctl.reader = FakeReader(snap, release="26.05.5")
    res = ctl.run_round()
    assert [a for a in res.actions if a.kind == "shrink-memory"] == []


def test_a_site_without_an_extern_step_is_told_once_and_not_asked(tmp_path, profiles_path,
                                                                 caplog):
    """Slurm lowers a running job's memory only for jobs with an extern step
    (PrologFlags=Contain): where slurm.conf lacks it, no shrink is planned at all and the
    log says once what the admin can do; after SIGHUP (refresh) with it set, it is."""
    snap = snapshot(running_at(1, "gnmt", 62500),
                    nodes=[node(alloc_cpus=3, alloc_gpus=1, alloc_mem_mb=62500)])
    ctl, writer = controller(tmp_path, profiles_path, snap)
    ctl.reader = FakeReader(snap, release="26.05.5", contains=False)
    measured(ctl, {1: 2000.0})
    with caplog.at_level("INFO"):
        first = ctl.run_round()
        ctl.run_round()
    assert not [a for a in first.actions if a.kind == "shrink-memory"] and not writer.calls
    told = [r for r in caplog.records if "PrologFlags=Contain" in r.getMessage()]
    assert len(told) == 1
    ctl.reader.contains = True
    ctl.refresh()
    assert [a.kind for a in ctl.run_round().actions] == ["shrink-memory"]


def test_a_job_slurm_refuses_to_shrink_is_not_asked_again(tmp_path, profiles_path):
    """A job that started before PrologFlags=Contain has no extern step: the writer says
    Unsupported, the round records the error, and later rounds leave that job as it is; a
    passing failure (a timeout) is asked again."""
    snap = snapshot(running_at(1, "gnmt", 62500),
                    nodes=[node(alloc_cpus=3, alloc_gpus=1, alloc_mem_mb=62500)])
    for error, asked_again in ((Unsupported("job 1: needs an extern step"), False),
                               (SlurmError("scontrol update timed out"), True)):
        ctl, writer = controller(tmp_path, profiles_path, snap)
        ctl.reader = FakeReader(snap, release="26.05.5")

        def refuse(job, mem, error=error, calls=writer.calls):
            calls.append(("shrink", job.job_id, mem))
            raise error
        writer.lower_running_memory = refuse
        measured(ctl, {1: 2000.0})
        first = ctl.run_round()
        second = ctl.run_round()
        assert first.results[1].result is Result.ERROR and first.errors == 1
        assert str(error) in first.results[1].detail
        assert writer.calls[0] == ("shrink", 1, 20830)
        again = [a for a in second.actions if a.kind == "shrink-memory"]
        assert bool(again) == asked_again, error


def test_a_users_key_that_leaves_its_cores_idle_is_capped_for_that_user(tmp_path,
                                                                         profiles_path):
    """eve's running alexnet job was given 12 cores per GPU and in 10 minutes used 0.1 of
    one: alexnet is marked suspect for eve (audit, metric, state) and her next alexnet job
    is planned with the proportional 3 cores; bob's alexnet job still gets all the node has
    left (9 of its 24 cores)."""
    from synergy_slurm.slurm.sstat import JobUse

    started = int(NOW) - 600
    idle = job(1, user="eve", state="RUNNING", reason="None", priority=1, cpus_per_gpu=12,
               mem_per_gpu_mb=125000, start_time=started, admin_comment="synergy.managed=1",
               nodes=("n1",), alloc=(NodeAlloc("n1", 12, 125000, 1),))
    eves, bobs = job(2, user="eve"), job(3, user="bob")
    snap = snapshot(idle, eves, bobs,
                    nodes=[node(alloc_cpus=12, alloc_gpus=1, alloc_mem_mb=125000)])
    ctl, writer = controller(tmp_path, profiles_path, snap)
    ctl.cfg = config_from_dict({**_doc(ctl), "usage": {"every_rounds": 1,
                                                      "min_observed_s": 300}})
    ctl.reader.used = {1: JobUse("1", cpu_s=60.0, peak_mem_mb=2000.0)}
    res = ctl.run_round()
    shaped = {c[1]: c[2] for c in writer.calls if c[0] == "reshape"}
    assert shaped[2].cpus_per_gpu == 3 and shaped[3].cpus_per_gpu == 9
    # The hook knows no users' caps: the key leaves its table in the round that marks it,
    # so a new alexnet job is held as unknown and shaped by the next round (where Slurm
    # lets known jobs start at once too).
    assert "alexnet" not in parse_table((tmp_path / TABLE_NAME).read_text()).profiles
    [mark] = ctl.state.suspects()
    assert (mark["key"], mark["user"], mark["status"]) == ("alexnet", "eve", "suspect")
    assert mark["cap_cpus"] == 3 and mark["cap_mem_gb"] == 62.5
    [row] = [r for r in audit(tmp_path) if r["action"] == "suspect"]
    assert row["user"] == "eve" and "used 1% of the cores" in row["reason"]
    assert ctl.metrics.suspects._value.get() == 1
    assert res.errors == 0
    # A second round keeps the mark, without a second audit entry or count.
    ctl.run_round()
    assert len([r for r in audit(tmp_path) if r["action"] == "suspect"]) == 1
    assert ctl.metrics.suspects._value.get() == 1
    # Cleared by an admin: trusted again.
    assert ctl.state.clear_suspect("alexnet", "eve") == 1
    writer.calls.clear()
    ctl.reader.used = {}
    ctl.run_round()
    shaped = {c[1]: c[2] for c in writer.calls if c[0] == "reshape"}
    assert shaped[2].cpus_per_gpu > 3
    assert parse_table((tmp_path / TABLE_NAME).read_text()).profiles["alexnet"] == (12, 125000)


def test_no_job_accounting_no_marks(tmp_path, profiles_path):
    """sstat reports nothing (no job accounting, or the read failed): nothing is judged,
    the round goes on."""
    running = job(1, user="eve", state="RUNNING", reason="None", priority=1, cpus_per_gpu=12,
                  mem_per_gpu_mb=125000, start_time=int(NOW) - 600,
                  admin_comment="synergy.managed=1", nodes=("n1",),
                  alloc=(NodeAlloc("n1", 12, 125000, 1),))
    ctl, _ = controller(tmp_path, profiles_path, snapshot(running))
    ctl.cfg = config_from_dict({**_doc(ctl), "usage": {"every_rounds": 1}})

    def fail(ids):
        raise SlurmError("sstat: error: no job accounting")
    ctl.reader.usage = fail
    res = ctl.run_round()
    assert res.errors == 0 and ctl.state.suspects() == []
    assert ctl.metrics.errors.labels("usage")._value.get() == 1


@pytest.mark.parametrize("trust, alice, bob, in_table", [
    ("all", 12, 12, True), ("own", 3, 12, False), ("site", 3, 3, False)])
def test_whose_measured_profiles_shape_a_users_jobs(tmp_path, profiles_path, trust, alice,
                                                    bob, in_table):
    """'bert' was measured by automatic profiling for bob (alexnet's curve): under
    trust=all it shapes everyone's bert jobs, under own only bob's, under site nobody's;
    the hook's table, which cannot tell users apart, carries it only under all."""
    from dataclasses import replace as _replace

    from synergy_slurm.profiles import load_profiles
    from synergy_slurm.profiles.store import ProfileStore

    bert = _replace(load_profiles(profiles_path)["alexnet"], key="bert")
    ProfileStore(tmp_path / "p.db").put(bert, measured_points=5, source="auto", owner="bob")
    held = "synergy.managed=1,synergy.held=1"
    snap = snapshot(job(1, user="alice", comment="synergy:profile=bert", admin_comment=held),
                    job(2, user="bob", comment="synergy:profile=bert", admin_comment=held),
                    nodes=[node(), SlurmNode("n2", cpus=24, mem_mb=500_000, gpus=8,
                                             state="idle", partitions=("gpu",))])
    ctl, writer = controller(tmp_path, profiles_path, snap)
    ctl.cfg = config_from_dict({**_doc(ctl), "profiles": {
        "file": str(profiles_path), "store": str(tmp_path / "p.db"), "trust": trust}})
    ctl.run_round()
    shaped = {c[1]: c[2].cpus_per_gpu for c in writer.calls if c[0] == "reshape"}
    assert (shaped[1], shaped[2]) == (alice, bob)
    table = parse_table((tmp_path / TABLE_NAME).read_text())
    assert ("bert" in table.profiles) is in_table
    assert ProfileStore(tmp_path / "p.db", readonly=True).get("bert").owner == "bob"


def test_a_pending_arrays_tasks_are_planned_side_by_side(tmp_path, profiles_path):
    """A held array of four 2-GPU alexnet tasks and, submitted later, a held 2-GPU job, on
    one 8-GPU node. Released, the array's four tasks start side by side and fill the node:
    planned as the tasks they are, the later job waits; planned as one job (as before),
    the later job was released into GPUs the tasks take. The throttle (%2) lets only two
    run, which leaves room for it."""
    array = job(10, gpus=2, gpus_per_job=2, array_job_id=10, array_pending_tasks=4)
    later = job(20, gpus=2, gpus_per_job=2, submit_time=int(NOW) - 30)
    ctl, writer = controller(tmp_path, profiles_path, snapshot(array, later))
    ctl.run_round()
    assert ("release", 10) in writer.calls and ("release", 20) not in writer.calls
    rows = {r["job_id"]: r for r in ctl.state.jobs()}
    assert set(rows) == {10, 20} and rows[20]["planned_cpus"] is None
    throttled = replace(array, array_throttle=2)
    ctl, writer = controller(tmp_path / "b", profiles_path, snapshot(throttled, later))
    ctl.run_round()
    assert ("release", 10) in writer.calls and ("release", 20) in writer.calls
