"""Partition limits on the real cluster: the controller and the hook never shape a job past
MaxCPUsPerNode, where Slurm would leave it pending for ever (reason PartitionConfig)."""

from __future__ import annotations

import pytest

from synergy_slurm.controller.daemon import Controller
from synergy_slurm.hook.table import TABLE_NAME, parse_table

from ..slurm.helpers import submit, wait_file, wait_for
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
