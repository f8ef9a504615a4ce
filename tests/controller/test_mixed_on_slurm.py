"""The mixed cluster (synergy_slurm/data/clusters/mixed.toml: 4-GPU A100 nodes with 64 cores,
8-GPU H100 nodes with 96 cores, partitions a100, h100 and 'all' over both) with accounting:
the controller plans each partition with its own defaults on its own nodes."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from synergy_slurm import devcluster
from synergy_slurm.config import config_from_dict
from synergy_slurm.controller.daemon import Controller
from synergy_slurm.controller.observe import pools
from synergy_slurm.devcluster import local_spec
from synergy_slurm.hook.table import TABLE_NAME
from synergy_slurm.site import load_site
from synergy_slurm.slurm.reader import SlurmReader

from ..conftest import TEST_SLURM, shared_dir, slot_dir, slot_port
from ..slurm.helpers import cancel_all, submit, wait_file, wait_for
from .test_priority_on_slurm import fair_share_reorders

pytestmark = pytest.mark.slurm
PORT = slot_port(16957)
REPORT = 'echo "cpus=$SLURM_CPUS_ON_NODE node=$SLURMD_NODENAME"'


@pytest.fixture(scope="module")
def mixed(slurm_cluster, request):
    """The mixed cluster beside the session's (own ports and directory), for this module."""
    spec = local_spec(slot_dir("synergy-test-mixed"), port=PORT, hook=True, slurm=TEST_SLURM,
                      binds=(str(shared_dir().resolve()),), accounting=True,
                      site=load_site("mixed"))
    devcluster.down(devcluster.existing_spec(spec.state_dir))
    seconds, spec = devcluster.up(spec, timeout_s=90)
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        print(f"\nmixed cluster: {len(spec.node_names)} nodes idle after {seconds:.1f} s")
    yield spec
    devcluster.down(spec)


@pytest.fixture
def env(mixed, tmp_path, profiles_path):
    cli = devcluster.slurm_cli(mixed, timeout_s=30)
    cancel_all(cli)
    tmp_path.chmod(0o755)
    cfg = config_from_dict({
        "slurm": {"conf": str(mixed.conf_path),
                  "bindir": str(mixed.bindir) if mixed.bindir.is_dir() else ""},
        "hook": {"dir": str(mixed.etc), "state_dir": str(mixed.etc),
                 "partitions": ["a100", "h100", "all"],
                 "default_partition": "a100", "max_age_s": 60},
        "profiles": {"file": str(profiles_path),
                     "store": str(tmp_path / "p.db")},
        "controller": {"mode": "enforce", "state_db": str(tmp_path / "s.db"),
                       "audit_log": str(tmp_path / "a.jsonl")}})
    yield cli, cfg, tmp_path
    cancel_all(cli)
    (mixed.etc / TABLE_NAME).unlink(missing_ok=True)


def test_the_cluster_has_typed_gpus_and_overlapping_partitions(env):
    cli, _, _ = env
    snap = SlurmReader(cli).snapshot()
    assert {n.name: n.gpus for n in snap.nodes} == {"a1": 4, "a2": 4, "h1": 8, "h2": 8}
    parts = {p.name: (p.nodes, p.def_cpu_per_gpu) for p in snap.partitions}
    assert parts["a100"] == (("a1", "a2"), 16) and parts["h100"] == (("h1", "h2"), 12)
    assert set(parts["all"][0]) == {"a1", "a2", "h1", "h2"}


def test_each_partition_is_planned_with_its_own_nodes_and_share(env):
    """shufflenet wants 12 cores/GPU. In h100 (12/GPU by default, 96 cores on 8 GPUs) it
    gets them; in 'all' (8/GPU) it is raised to them; every job lands on a node of its
    partition, and nothing exceeds what a node has per GPU."""
    cli, cfg, tmp = env
    ctl = Controller(cfg)
    ctl.run_round()                                     # the hook's table
    jobs = {}
    for part in ("a100", "h100", "all"):
        jobs[part] = submit(cli, REPORT, "-p", part, "--gpus=2",
                            "--comment=synergy:profile=shufflenet", "-o", str(tmp / part),
                            tmp=tmp)
    res = ctl.run_round()
    assert res.errors == 0, res.results
    rows = {r["job_id"]: r for r in ctl.state.jobs()}
    for part, jid in jobs.items():
        wait_for(cli, jid, {"COMPLETED"}, 60)
        out = wait_file(tmp / part, "cpus=")
        node = out.split("node=")[1].split()[0]
        cpus = int(out.split("cpus=")[1].split()[0])
        assert (part != "a100" or node.startswith("a")) and \
            (part != "h100" or node.startswith("h")), (part, node)
        assert cpus == rows[jid]["planned_cpus"] * 2, (part, cpus, rows[jid])
    assert rows[jobs["all"]]["planned_cpus"] > 8          # raised above 'all''s share
    assert rows[jobs["h100"]]["planned_cpus"] <= 12       # within an H100 node per GPU


def test_a_typed_request_runs_and_is_planned_on_its_type(env):
    """--gpus=h100:2 in 'all': the node reader sees the GPU types, the plan puts the job on
    an H100 node, and Slurm runs it there with the planned cores."""
    cli, cfg, tmp = env
    snap = SlurmReader(cli).snapshot()
    assert {n.name: n.gpu_type for n in snap.nodes} == {"a1": "a100", "a2": "a100",
                                                         "h1": "h100", "h2": "h100"}
    ctl = Controller(cfg)
    ctl.run_round()
    jid = submit(cli, REPORT, "-p", "all", "--gpus=h100:2",
                 "--comment=synergy:profile=shufflenet", "-o", str(tmp / "typed"), tmp=tmp)
    job = SlurmReader(cli).snapshot().job(jid)
    assert job is not None and job.gpu_type == "h100"
    snap = SlurmReader(cli).snapshot()
    plan, _ = ctl._plan_pools(snap, pools(snap, cfg), [job], ctl.profiles(), False, False, 0.0)
    assert plan.allocations[0].placement[0][0].startswith("h")
    assert ctl.run_round().errors == 0
    wait_for(cli, jid, {"COMPLETED"}, 60)
    out = wait_file(tmp / "typed", "cpus=")
    assert out.split("node=")[1].split()[0].startswith("h")


def test_a_profile_is_used_only_on_the_gpu_type_it_was_measured_on(env):
    """A key measured on H100s says nothing of A100s: a job asking for A100s is planned
    proportionally (8 cores/GPU in 'all') until its key has a profile of that type, then by
    it; an untyped request in 'all' may land on either type, so neither typed profile is
    used for it (and the controller would not profile it, naming why)."""
    cli, cfg, _ = env
    ctl = Controller(cfg)
    curve = ctl.profiles()["shufflenet"]            # wants 12 cores/GPU
    held = {t: submit(cli, "true", "-p", "all", "-H", f"--gpus={t}2",
                      "--comment=synergy:profile=typed", tmp=env[2])
            for t in ("a100:", "")}
    snap = SlurmReader(cli).snapshot()
    found = pools(snap, cfg)
    jobs = [j for j in snap.jobs if j.job_id in held.values()]
    jobs = [replace(j, priority=1, reason="Priority") for j in jobs]   # plan them as pending

    def planned(profiles):
        plan, _ = ctl._plan_pools(snap, found, jobs, profiles, False, False, 0.0)
        return {a.job_id: a.share.cpus for a in plan.allocations}

    h100 = replace(curve, key="typed", gpu_type="h100")
    a100 = replace(curve, key="typed", gpu_type="a100")
    assert planned({h100.slot: h100}) == {held["a100:"]: 8, held[""]: 8}
    got = planned({h100.slot: h100, a100.slot: a100})
    assert got[held["a100:"]] > 8 and got[held[""]] == 8, got
    untyped = replace(curve, key="typed")
    assert planned({untyped.slot: untyped})[held[""]] > 8


def test_a_qos_limit_caps_a_raise_in_a_partition_with_its_own_share(env):
    """In 'all' (8 cores/GPU by default) shufflenet wants 12 per GPU, 24 for 2 GPUs; a QOS
    lets a user run 20 cores: the plan raises the job to 10 per GPU, under the limit, and
    Slurm starts it (raised to 12 it would wait on QOSMaxCpuPerUserLimit for ever)."""
    cli, cfg, tmp = env
    cli.run("sacctmgr", ["-i", "add", "qos", "symix", "set", "MaxTRESPerUser=cpu=20"])
    cli.run("sacctmgr", ["-i", "modify", "user", "root", "set", "qos+=symix"])
    try:
        deadline = time.monotonic() + 20
        while SlurmReader(cli).limits().qos_named("symix") is None:
            assert time.monotonic() < deadline, "QOS symix never appeared"
            time.sleep(0.3)
        time.sleep(1)
        ctl = Controller(cfg)
        ctl.run_round()
        jid = submit(cli, REPORT, "-p", "all", "--gpus=2", "--qos=symix",
                     "--comment=synergy:profile=shufflenet", "-o", str(tmp / "q"), tmp=tmp)
        assert ctl.run_round().errors == 0
        wait_for(cli, jid, {"COMPLETED"}, 60)
        row = next(r for r in ctl.state.jobs() if r["job_id"] == jid)
        assert row["planned_cpus"] == 10
        assert "cpus=20" in wait_file(tmp / "q", "cpus=")
    finally:
        cancel_all(cli)
        cli.run("sacctmgr", ["-i", "modify", "user", "root", "set", "qos-=symix"])
        cli.run("sacctmgr", ["-i", "delete", "qos", "symix"])


def test_fair_share_reorders_jobs_on_the_mixed_cluster_and_the_plan_follows(env, mixed):
    """The fair-share test of test_priority_on_slurm.py on this site's shape: jobs that
    take all four nodes of partition 'all' (A100 and H100), one at a time."""
    cli, _, tmp = env
    fair_share_reorders(cli, mixed, tmp, ("-p", "all", "-N4", "--exclusive",
                                          "--gpus-per-node=4"))

