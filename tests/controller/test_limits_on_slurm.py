"""Limits on the real cluster: the controller and the hook never shape a job past a
partition's MaxCPUsPerNode (reason PartitionConfig) or a QOS's limits on cores and memory
(QOSMax...Limit, QOSGrp...Limit), where Slurm would leave it pending for ever."""

from __future__ import annotations

import time

import pytest

from synergy_slurm.controller.daemon import Controller
from synergy_slurm.hook.table import TABLE_NAME, parse_table
from synergy_slurm.slurm.reader import SlurmReader

from ..slurm.helpers import cancel_all, job_fields, per_gpu, submit, wait_file, wait_for
from .conftest import load
from .test_controller_on_slurm import REPORT

pytestmark = pytest.mark.slurm


@pytest.fixture
def capped_partition(env):
    env["cli"].run("scontrol", ["update", "PartitionName=gpu", "MaxCPUsPerNode=16"])
    yield
    env["cli"].run("scontrol", ["update", "PartitionName=gpu", "MaxCPUsPerNode=UNLIMITED"])


def test_a_raised_job_stays_within_max_cpus_per_node(env, capped_partition):
    cli, tmp = env["cli"], env["tmp"]
    ctl = Controller(load(env))
    ctl.run_round()                 # publishes the hook's table, capped to 16 cores a node
    assert parse_table((env["cluster"].etc / TABLE_NAME).read_text()).node_cpus == 16
    # alexnet's profile wants 12 cores/GPU: 24 on one node, past the partition's 16.
    out = tmp / "o"
    jid = submit(cli, REPORT, "--gpus=2", "--comment=synergy:profile=alexnet", "-o", str(out),
                 tmp=tmp)
    res = ctl.run_round()           # shapes and releases it
    assert res.errors == 0, res.results
    wait_for(cli, jid, {"COMPLETED"}, 60)
    cpus = int(wait_file(out, "cpus=").split("cpus=")[1].split()[0])
    assert 6 < cpus <= 16           # more than the proportional 2 x 3, within the limit


# -- QOS limits (accounting) ---------------------------------------------------------------
def sacctmgr(env, *args: str) -> str:
    return env["cli"].run("sacctmgr", ["-i", *args])


@pytest.fixture
def qos(env):
    """Make a QOS root may use; removed afterwards (with root's access to it)."""
    made: list[str] = []

    def make(name: str, *limits: str) -> str:
        sacctmgr(env, "add", "qos", name, "set", *limits)
        sacctmgr(env, "modify", "user", "root", "set", f"qos+={name}")
        made.append(name)
        # slurmdbd pushes the change to slurmctld; wait until the controller's read sees it.
        deadline = time.monotonic() + 20
        while SlurmReader(env["cli"]).limits().qos_named(name) is None:
            assert time.monotonic() < deadline, f"QOS {name} never appeared"
            time.sleep(0.3)
        time.sleep(1)
        return name

    yield make
    cancel_all(env["cli"])
    for name in made:
        sacctmgr(env, "modify", "user", "root", "set", f"qos-={name}")
        sacctmgr(env, "delete", "qos", name)


def test_a_qos_per_user_core_limit_caps_the_raise(env, qos):
    """alexnet wants 12 cores/GPU, 24 for 2 GPUs; the QOS lets a user run 16. Read without
    the limit, the controller shapes it to 24 and Slurm keeps it pending on the limit; with
    it, the job starts with more than its proportional 6 and at most 16."""
    cli, tmp = env["cli"], env["tmp"]
    name = qos("syncap", "MaxTRESPerUser=cpu=16")
    blind = Controller(load(env))
    blind.reader.limits = lambda: None          # what the controller did before limits
    blind.run_round()                            # publishes the hook's table
    jid = submit(cli, REPORT, "--gpus=2", f"--qos={name}", "--comment=synergy:profile=alexnet",
                 "-o", str(tmp / "blind"), tmp=tmp)
    assert blind.run_round().errors == 0
    fields = wait_for(cli, jid, {"PENDING"})
    deadline = time.monotonic() + 15             # two scheduler passes
    while "Limit" not in fields.get("Reason", "") and time.monotonic() < deadline:
        time.sleep(0.5)
        fields = job_fields(cli, jid)
    assert fields["JobState"] == "PENDING" and "QOSMaxCpuPerUserLimit" in fields["Reason"], \
        fields
    cli.run("scancel", [str(jid)])

    runs_raised_within_16_cores(env, f"--qos={name}")


def runs_raised_within_16_cores(env, *opts: str) -> None:
    """A 2-GPU alexnet job (12 cores/GPU wanted) under a 16-core limit: planned 8 per GPU,
    it starts with more than its proportional 6 and at most 16."""
    cli, tmp = env["cli"], env["tmp"]
    ctl = Controller(load(env))
    out = tmp / "o"
    jid = submit(cli, REPORT, "--gpus=2", *opts, "--comment=synergy:profile=alexnet",
                 "-o", str(out), tmp=tmp)
    res = ctl.run_round()
    assert res.errors == 0, res.results
    wait_for(cli, jid, {"COMPLETED"}, 60)
    cpus = int(wait_file(out, "cpus=").split("cpus=")[1].split()[0])
    assert 6 < cpus <= 16
    row = next(r for r in ctl.state.jobs() if r["job_id"] == jid)
    assert row["planned_cpus"] == 8


def test_a_qos_group_memory_limit_caps_the_raise(env, qos):
    """m5 wants 187.5 GB for its one GPU; the QOS's jobs may hold 150 GB together."""
    cli, tmp = env["cli"], env["tmp"]
    name = qos("symem", "GrpTRES=mem=150000")
    ctl = Controller(load(env))
    ctl.run_round()
    jid = submit(cli, "sleep 1", "--gpus=1", f"--qos={name}", "--comment=synergy:profile=m5",
                 "-o", str(tmp / "o"), tmp=tmp)
    assert ctl.run_round().errors == 0
    fields = wait_for(cli, jid, {"COMPLETED"}, 60)
    row = next(r for r in ctl.state.jobs() if r["job_id"] == jid)
    assert 62_500 < row["planned_mem_mb"] <= 150_000
    assert per_gpu(fields, "MemPerTres") == row["planned_mem_mb"]


@pytest.fixture
def parent_account(env):
    """lab-a moved under a new account 'synergy-dept' with GrpTRES=cpu=16; moved back and
    the account removed afterwards."""
    sacctmgr(env, "add", "account", "synergy-dept")
    sacctmgr(env, "modify", "account", "lab-a", "set", "parent=synergy-dept")
    sacctmgr(env, "modify", "account", "synergy-dept", "set", "GrpTRES=cpu=16")
    deadline = time.monotonic() + 20
    while "synergy-dept" not in SlurmReader(env["cli"]).limits().accounts_above("lab-a"):
        assert time.monotonic() < deadline, "the new parent never appeared"
        time.sleep(0.3)
    time.sleep(1)
    yield "lab-a"
    cancel_all(env["cli"])
    sacctmgr(env, "modify", "account", "lab-a", "set", "parent=root")
    sacctmgr(env, "delete", "account", "synergy-dept")


def test_a_parent_accounts_core_limit_caps_the_raise(env, parent_account):
    """alexnet wants 24 cores for 2 GPUs; lab-a's parent account may run 16 together. Read
    without walking up to the parent the controller would shape it to 24 (Slurm: pending
    on AssocGrpCpuLimit); walking it, the job starts with more than 6 and at most 16."""
    Controller(load(env)).run_round()            # the hook's table
    runs_raised_within_16_cores(env, f"--account={parent_account}")
