"""The closed loop on a busy machine: the cores a running job could have kept busy on its
nodes (their hosts' cores and load), over its running time, so that an honest job squeezed
by a noisy neighbour or an oversubscribed host is not taken for one that idles."""

from __future__ import annotations

import pytest

from synergy_slurm.controller.usage import HostLoad, _over_time, could_cpus
from synergy_slurm.slurm.model import NodeAlloc, SlurmJob, SlurmNode
from synergy_slurm.slurm.parse import parse_nodes

from ..slurm.test_parse import RECORDED, nodes_file


def job(*alloc: NodeAlloc, gpus: int = 1) -> SlurmJob:
    return SlurmJob(7, user="bob", state="RUNNING", partition="gpu", gpus=gpus,
                    alloc=alloc)


def on(name: str, cpus: int) -> NodeAlloc:
    return NodeAlloc(name, cpus=cpus, mem_mb=62500, gpus=1)


def node(name: str, cpus: int = 24, load: float | None = None, host: str = "") -> SlurmNode:
    return SlurmNode(name, cpus=cpus, mem_mb=500_000, gpus=8, load=load, host=host)


def test_what_a_job_could_get_on_its_nodes():
    nodes = {"n1": node("n1", load=48.0), "n2": node("n2", load=3.0),
             "n3": node("n3"), "n4": node("n4", host="vm")}
    # 48 runnable tasks on 24 cores: half of its 12.
    assert could_cpus(job(on("n1", cpus=12)), nodes) == pytest.approx(6.0)
    # An idle node, or one whose load is not known: all it holds (None: not short).
    assert could_cpus(job(on("n2", cpus=12)), nodes) is None
    assert could_cpus(job(on("n3", cpus=12)), nodes) is None
    # A node on this very host (a test cluster: 24 cores configured, 2 real, load 7):
    # the host's own cores and load count, not Slurm's configured ones.
    here = ("vm", HostLoad(2, 7.0))
    assert could_cpus(job(on("n4", cpus=4)), nodes, here) == \
        pytest.approx(2 * 2 / 7)
    # Over two nodes, per GPU: 6 of 12 on n1, all 12 on n2.
    two = job(on("n1", cpus=12), on("n2", cpus=12), gpus=2)
    assert could_cpus(two, nodes) == pytest.approx(9.0)


def test_over_its_running_time():
    # 100 s uncontended at 4 cores, then 100 s at 1: 2.5 on average.
    assert _over_time({"observed_s": 100.0, "could_cpus": None}, 1.0, 4, 200.0) == 2.5
    assert _over_time({"observed_s": 100.0, "could_cpus": 1.0}, None, 4, 200.0) == 2.5
    assert _over_time(None, None, 4, 200.0) is None
    assert _over_time(None, 1.0, 4, 200.0) == 1.0


@pytest.mark.parametrize("version", RECORDED)
def test_slurmd_reports_each_nodes_load_and_host(version):
    nodes, _ = parse_nodes(nodes_file(version).read_text())
    assert all(n.load is not None and 0 <= n.load < 100 and n.host == "vm" for n in nodes)
