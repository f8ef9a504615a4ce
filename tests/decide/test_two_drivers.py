"""The controller and the controller model decide alike: one sequence of rounds driven
through both, job by job.

The same jobs (known profiles, an unknown one, one that sets its own cores, one that waits
already scheduled) are pending on the same node. The controller plans them from a
snapshot (the shipped fake Slurm records what it writes); the controller model plans them
from a trace at its first round (its reconcile steps recorded). Round after round (22.05's
rules: every managed job held but those whose shape is final; then 26.05's: known
profiles shaped at submission, pending jobs lowered), each job's step and share must be
the same in both."""

from __future__ import annotations

import pytest

from synergy_slurm.config import config_from_dict
from synergy_slurm.controller.audit import AuditLog
from synergy_slurm.controller.daemon import Controller
from synergy_slurm.controller.state import StateStore
from synergy_slurm.core import ClusterState, JobSpec, PerGpu
from synergy_slurm.core.demand import ideal_demand
from synergy_slurm.decide import Change, in_slurm_units, needs_no_hold
from synergy_slurm.sim import controller_model
from synergy_slurm.sim.config import SlurmConfig
from synergy_slurm.sim.trace import TraceJob
from synergy_slurm.slurm.fake import FakeReader, FakeWriter
from synergy_slurm.slurm.model import SlurmJob, SlurmNode, SlurmPartition, Snapshot

NOW = 1_800_000_000.0
FAIR = PerGpu(3, 62.5)
NODE = ClusterState.uniform(1, 8, 24, 500)
# id -> (profile key or "", GPUs, what synergy changes, own cores per GPU or None)
JOBS = {
    1: ("alexnet", 2, Change.RESHAPE, None),
    2: ("res18", 1, Change.RESHAPE, None),
    3: ("", 1, Change.RELEASE, None),
    4: ("", 1, Change.RELEASE, 6),
    5: ("transformer", 2, Change.RESHAPE, None),
    6: ("m5", 1, Change.RESHAPE, None),
}


def hook_share(profiles, key: str, gpus: int) -> tuple[int, int]:
    """What the hook gives a known profile at submission: its ideal share, capped at a
    node, as cores and MB per GPU."""
    spec = JobSpec(0, gpus, profile=profiles[key], profile_key=key)
    return in_slurm_units(ideal_demand(spec, FAIR, NODE.servers).share)


def slurm_jobs(profiles, held: bool) -> tuple[SlurmJob, ...]:
    out = []
    for jid, (key, gpus, _, own) in JOBS.items():
        tags = "synergy.managed=1" + (f",synergy.profile={key}" if key else "")
        # 22.05's hook holds known profiles, but not one whose shape is final (within the
        # proportional share: transformer); an unknown one always.
        hold = not key or (held and not needs_no_hold(profiles[key].ideal, FAIR))
        mem = None
        if key:     # the hook shapes a known profile, held (22.05) or not (26.05)
            own, mem = hook_share(profiles, key, gpus)
        out.append(SlurmJob(
            jid, "alice", "PENDING", "gpu", gpus=gpus, gpus_per_job=gpus,
            priority=0 if hold else 1000 - jid, reason="JobHeldUser" if hold else "Resources",
            submit_time=int(NOW) - 100 + jid, cpus_per_gpu=own, mem_per_gpu_mb=mem,
            comment=f"synergy:profile={key}" if key else "",
            admin_comment=tags + (",synergy.held=1" if hold else "")))
    return tuple(out)


def controller_steps(tmp_path, profiles_path, profiles, held: bool, release: str
                     ) -> dict[int, tuple]:
    snap = Snapshot(slurm_jobs(profiles, held), (SlurmNode("n1", cpus=24, mem_mb=500_000, gpus=8,
                                                 state="idle", partitions=("gpu",)),),
                    (SlurmPartition("gpu", ("n1",), 3, 62500, True),), release)
    cfg = config_from_dict({
        "hook": {"dir": str(tmp_path), "state_dir": str(tmp_path)},
        "profiles": {"file": str(profiles_path), "store": str(tmp_path / "p.db")},
        "controller": {"mode": "enforce", "state_db": str(tmp_path / "state.db"),
                       "audit_log": str(tmp_path / "audit.jsonl"), "requeue_budget": 0}})
    ctl = Controller(cfg, clock=lambda: NOW, reader=FakeReader(snap, release=release),
                     writer=FakeWriter(), state=StateStore(":memory:"),
                     audit=AuditLog(tmp_path / "audit.jsonl"))
    res = ctl.run_round()
    assert res.errors == 0
    out = {}
    for a in res.actions:
        shape = (a.after or a.before)
        out[a.job_id] = (a.kind, (shape.cpus_per_gpu, shape.mem_per_gpu_mb))
    return out


def model_steps(monkeypatch, profiles, lowers: bool) -> dict[int, tuple]:
    """Each job's first reconcile step in the model, and the share it took."""
    seen: dict[int, tuple] = {}
    real = controller_model._Model._reshape

    def record(self, run, share, t):
        got = controller_model.reconcile(controller_model._view(run), share,
                                         self.cfg.lowers_pending)
        real(self, run, share, t)
        if got is not None:
            seen.setdefault(run.trace.job_id, (str(got.step), in_slurm_units(got.after)))

    monkeypatch.setattr(controller_model._Model, "_reshape", record)
    trace = [TraceJob(jid, key, 0.0, 1000, gpus, priority=1000 - jid, work_s=600.0,
                      share=PerGpu(own, 62.5) if own else None, change=str(change))
             for jid, (key, gpus, change, own) in JOBS.items()]
    cfg = SlurmConfig(NODE, policy="slurm",
                    allocator="tune", round_s=30.0,
                    controller_interval_s=30.0, lowers_pending=lowers, release_delay_s=2.0)
    controller_model.simulate_slurm(trace, profiles, cfg)
    return seen


@pytest.mark.parametrize(("release", "lowers"), [("22.05.8", False), ("26.05.5", True)])
def test_one_sequence_of_rounds_through_both_drivers(tmp_path, monkeypatch, profiles_path,
                                                    paper_profiles, release, lowers):
    ctl = controller_steps(tmp_path, profiles_path, paper_profiles, held=not lowers,
                           release=release)
    model = model_steps(monkeypatch, paper_profiles, lowers)
    assert set(ctl) == set(model), (ctl, model)
    assert len(ctl) >= 4        # most jobs have a step (a job shaped already may have none)
    for jid in ctl:
        assert ctl[jid] == model[jid], (jid, ctl[jid], model[jid])
    # The unknown jobs keep the shape they have: the default, and job 4's own 6 cores.
    assert ctl[3][1][0] == FAIR.cpus and ctl[4][1][0] == 6
