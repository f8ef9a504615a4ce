"""The pyslurm reader on recorded output: pyslurm's dictionaries and the commands' JSON of
the same jobs, read at the same moment on a Slurm 24.11.5 dev cluster with typed GPUs
(scripts/record/record_pyslurm.py), must give the same snapshot. The live check is
tests/slurm/test_pyslurm_on_slurm.py."""

from __future__ import annotations

import dataclasses
import json
import types
from pathlib import Path

import pytest

from synergy_slurm.slurm.commands import SlurmError
from synergy_slurm.slurm.pyslurm_records import job_record, node_record
from synergy_slurm.slurm.reader import PyslurmReader, build_snapshot
from synergy_slurm.slurm.release import Release

FIXTURE = Path(__file__).parent / "fixtures" / "pyslurm_24.11.5.json"


class PartitionsCli:
    def __init__(self, text: str) -> None:
        self.text = text

    def run(self, cmd, args, **kw):
        assert (cmd, args) == ("scontrol", ["show", "partition", "-o"])
        return self.text


def fake_pyslurm(jobs: dict, nodes: dict):
    return types.SimpleNamespace(__version__="24.11.0",
                                 job=lambda: types.SimpleNamespace(get=lambda: jobs),
                                 node=lambda: types.SimpleNamespace(get=lambda: nodes))


@pytest.fixture(scope="module")
def recorded():
    doc = json.loads(FIXTURE.read_text())
    jobs = {int(k): v for k, v in doc["pyslurm_jobs"].items()}
    reader = PyslurmReader(PartitionsCli(doc["partitions"]),
                           fake_pyslurm(jobs, doc["pyslurm_nodes"]), Release.parse(doc["release"]))
    by_json = build_snapshot(json.dumps(doc["squeue"]), json.dumps(doc["nodes"]),
                             doc["partitions"])
    return by_json, reader.snapshot()


def test_every_job_reads_the_same_field_by_field(recorded):
    by_json, by_pyslurm = recorded
    assert len(by_json.jobs) >= 15 and not by_json.skipped and not by_pyslurm.skipped
    names = {j.name for j in by_json.jobs}
    assert {"held", "array", "het", "typed", "pertask", "multinode", "nogpu", "memcpu",
            "uneven", "limit", "memnode"} <= names
    assert [j.job_id for j in by_pyslurm.jobs] == [j.job_id for j in by_json.jobs]
    for a, b in zip(by_json.jobs, by_pyslurm.jobs, strict=True):
        left, right = dataclasses.asdict(a), dataclasses.asdict(b)
        if a.name == "uneven":
            # --gpus=5 over two nodes: the dictionaries do not say it took 4 + 1 (the
            # module's note); pyslurm's reader leaves the layout out rather than guess.
            assert a.running and len(a.nodes) == 2 and b.alloc == ()
            assert sum(x.gpus for x in a.alloc) == b.gpus == 5
            left.pop("alloc"), right.pop("alloc")
        assert left == right, a.name


def test_running_jobs_layouts_come_through(recorded):
    by_pyslurm = recorded[1]
    multi = next(j for j in by_pyslurm.jobs if j.name == "multinode")
    assert multi.running and [(a.node, a.gpus) for a in multi.alloc] == [("h1", 2), ("h2", 2)]
    held = next(j for j in by_pyslurm.jobs if j.name == "held")
    assert held.pending and held.priority == 0 and "Held" in held.reason
    typed = next(j for j in by_pyslurm.jobs if j.name == "typed")
    assert typed.gpu_type == "a100" and typed.comment == "synergy:key=res18"


def test_nodes_and_partitions_read_the_same(recorded):
    by_json, by_pyslurm = recorded
    assert by_pyslurm.nodes == by_json.nodes and by_pyslurm.partitions == by_json.partitions
    assert by_pyslurm.version == by_json.version == "24.11.5"
    assert {n.gpu_type for n in by_pyslurm.nodes} == {"a100", "h100"}


def test_record_conversions_of_odd_values():
    rec = job_record({"job_id": 7, "job_state": "PENDING", "user_id": 4242424,
                      "time_limit": "Partition_Limit", "mem_per_cpu": True,
                      "min_memory_cpu": 1024, "num_cpus": 4},
                     user_name=lambda uid: "u" if uid == 1 else str(uid))
    assert rec["user_name"] == "4242424" and rec["cpus"] == 4
    assert rec["time_limit"] == {"set": False, "infinite": False, "number": 0}
    assert rec["memory_per_cpu"]["number"] == 1024 and not rec["memory_per_node"]["set"]
    assert node_record({"name": "n1", "state": "IDLE+DRAIN", "gres": None})["state"] == \
        ["IDLE", "DRAIN"]


def test_a_failed_pyslurm_read_is_a_slurm_error():
    def boom():
        raise ValueError("Unable to contact slurm controller")

    module = types.SimpleNamespace(job=lambda: types.SimpleNamespace(get=boom))
    reader = PyslurmReader(PartitionsCli(""), module, Release(24, 11, 5))
    with pytest.raises(SlurmError, match="pyslurm could not read the cluster: Unable"):
        reader.snapshot()


def test_a_bad_record_is_skipped_with_its_reason_and_the_rest_read(recorded):
    doc = json.loads(FIXTURE.read_text())
    jobs = {int(k): v for k, v in doc["pyslurm_jobs"].items()}
    first = min(j.job_id for j in recorded[0].jobs if j.running and len(j.nodes) == 1)
    jobs[first] = dict(jobs[first], tres_alloc_str="cpu=lots,mem=4G")   # cores unreadable
    jobs[999999] = "not a record"
    reader = PyslurmReader(PartitionsCli(doc["partitions"]),
                           fake_pyslurm(jobs, doc["pyslurm_nodes"]), Release(24, 11, 5))
    snap = reader.snapshot()
    assert [s.what for s in snap.skipped] == ["job 999999"]
    assert "pyslurm record" in snap.skipped[0].reason
    assert len(snap.jobs) == len(recorded[0].jobs)
    assert snap.job(first).alloc == ()          # counted by its request instead
