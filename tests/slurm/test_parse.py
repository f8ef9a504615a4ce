"""The parser on output recorded from each Slurm release (scripts/record/record_fixtures.py),
a hand-written sample of what the dev cluster cannot produce yet (typed GPUs), and bad
input. The same submissions parse to the same jobs on every release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synergy_slurm.slurm.parse import (
    ParseError,
    count_array_tasks,
    detail_mem_mb,
    expand_hostlist,
    gpu_count,
    num,
    parse_jobs,
    parse_kv_line,
    parse_nodes,
    parse_partitions,
)
from synergy_slurm.slurm.reader import build_snapshot

FIX = Path(__file__).parent / "fixtures"
V22 = "22.05.8"
RECORDED = sorted(p.name.removeprefix("squeue_").removesuffix(".json")
                  for p in FIX.glob("squeue_*.json") if "handwritten" not in p.name)


def recorded_jobs(version: str):
    jobs, skipped = parse_jobs((FIX / f"squeue_{version}.json").read_text())
    assert skipped == []
    return {j.name + (f"#{j.job_id}" if j.name in ("array", "het") else ""): j for j in jobs}


def nodes_file(version: str) -> Path:
    """Per-node records: ``sinfo --json`` on 22.05, ``scontrol show nodes --json`` after."""
    scontrol = FIX / f"nodes_{version}.json"
    return scontrol if scontrol.exists() else FIX / f"sinfo_{version}.json"


def test_every_supported_release_is_recorded():
    assert {v.rsplit(".", 1)[0] for v in RECORDED} >= {"22.05", "24.11", "26.05"}


@pytest.mark.parametrize("version", RECORDED)
def test_recorded_gpu_job_kinds(version):
    j = recorded_jobs(version)
    g = j["gpus2"]
    assert (g.gpus, g.gpus_per_job, g.cpus, g.cpus_per_gpu, g.mem_per_gpu_mb) == (2, 2, 6, 3, 2048)
    assert g.state == "RUNNING" and g.nodes == ("n1",) and g.alloc[0].node == "n1"
    assert g.alloc[0].mem_mb == 4096 and g.alloc[0].gpus == 2 and g.alloc[0].cpus == 6
    m = j["multinode"]
    assert (m.gpus, m.gpus_per_node, m.num_nodes, m.nodes) == (16, 8, 2, ("n2", "n3"))
    assert m.cpus_per_gpu == 3 and m.mem_per_gpu_mb == 62500   # shaped by DefCpuPerGPU
    assert [a.cpus for a in m.alloc] == [24, 24] and [a.gpus for a in m.alloc] == [8, 8]
    t = j["pertask"]
    assert (t.gpus, t.gpus_per_task, t.num_tasks) == (2, 1, 2)
    r = j["gres1"]
    assert (r.gpus, r.gpus_per_node) == (1, 1) and r.comment == "synergy:key=res18"
    assert j["memnode"].mem_per_node_mb == 10240 and j["memnode"].requeue is False


@pytest.mark.parametrize("version", RECORDED)
def test_recorded_non_gpu_held_array_and_het(version):
    j = recorded_jobs(version)
    assert j["nogpu"].gpus == 0 and not j["nogpu"].has_gpus
    h = j["held"]
    assert h.held and h.pending and h.priority == 0 and h.cpus_per_gpu is None
    arrays = [v for k, v in j.items() if k.startswith("array#")]
    assert len(arrays) == 3 and len({a.array_job_id for a in arrays}) == 1
    assert sorted(a.array_task_id for a in arrays) == [0, 1, 2]
    hets = [v for k, v in j.items() if k.startswith("het#")]
    assert len({h.het_job_id for h in hets}) == 1 and sorted(h.gpus for h in hets) == [0, 1]
    w = j["waits"]
    assert w.pending and not w.held and w.reason == "Resources" and w.gpus == 8


def test_the_same_submissions_parse_alike_on_every_release():
    def view(job):
        # A pending job's cpus differ on purpose: 24.05 made the requested cores count
        # --cpus-per-gpu (22.05: 1 until it starts). Checked on its own below.
        return (job.state, job.gpus, job.gpus_per_job, job.gpus_per_node,
                job.gpus_per_task, None if job.pending else job.cpus, job.cpus_per_gpu,
                job.mem_per_gpu_mb, job.mem_per_node_mb, job.mem_per_cpu_mb, job.held,
                job.requeue, job.comment, job.num_nodes, job.num_tasks,
                bool(job.array_job_id), bool(job.het_job_id), job.pending_array,
                job.gpu_request, tuple((a.cpus, a.mem_mb, a.gpus) for a in job.alloc))

    def by_name(version):
        return sorted((j.name, view(j)) for j in recorded_jobs(version).values())

    first, *rest = RECORDED
    for version in rest:
        assert by_name(version) == by_name(first), version
    for version in RECORDED:
        waits = recorded_jobs(version)["waits"]
        newer = tuple(map(int, version.split(".")[:2])) >= (24, 5)
        assert waits.cpus == (waits.gpus * waits.cpus_per_gpu if newer else 1), version


@pytest.mark.parametrize("version", RECORDED)
def test_recorded_nodes_and_partitions(version):
    nodes, skipped = parse_nodes(nodes_file(version).read_text())
    assert skipped == [] and [n.name for n in nodes] == ["n1", "n2", "n3", "n4"]
    n1 = next(n for n in nodes if n.name == "n1")
    assert (n1.cpus, n1.mem_mb, n1.gpus) == (24, 500000, 8)
    assert n1.alloc_gpus > 0 and n1.alloc_cpus > 0 and n1.usable
    parts, skipped = parse_partitions((FIX / f"partitions_{version}.txt").read_text())
    assert skipped == []
    assert parts[0].name == "gpu" and parts[0].def_cpu_per_gpu == 3
    assert parts[0].def_mem_per_gpu_mb == 62500 and parts[0].nodes == ("n1", "n2", "n3", "n4")
    assert parts[0].max_cpus_per_node is None and parts[0].max_mem_per_node_mb is None
    capped = (FIX / f"partitions_{version}.txt").read_text().replace(
        "MaxCPUsPerNode=UNLIMITED", "MaxCPUsPerNode=16").replace(
        "MaxMemPerNode=UNLIMITED", "MaxMemPerNode=200000")
    (part,), _ = parse_partitions(capped)
    assert (part.max_cpus_per_node, part.max_mem_per_node_mb) == (16, 200_000)


def test_snapshot_drops_finished_jobs_and_keeps_the_version():
    snap = build_snapshot((FIX / "squeue_24.11_handwritten.json").read_text(),
                          (FIX / "sinfo_24.11_handwritten.json").read_text(),
                          (FIX / f"partitions_{V22}.txt").read_text())
    assert [j.job_id for j in snap.jobs] == [42, 43]       # 44 is COMPLETED
    assert snap.version == "24.11.3"


def test_newer_wrapped_numbers_and_typed_gpus():
    jobs, skipped = parse_jobs((FIX / "squeue_24.11_handwritten.json").read_text())
    assert skipped == []
    held, typed = jobs[0], jobs[1]
    assert held.held and held.gpus == 2 and held.cpus_per_gpu == 6
    assert held.mem_per_gpu_mb == 125000 and held.mem_per_node_mb is None
    assert typed.gpu_type == "a100" and typed.gpus_per_node == 2 and typed.gpus == 4
    assert typed.nodes == ("gpu-a01", "gpu-a02") and typed.restarts == 1
    assert [(a.node, a.cpus, a.mem_mb, a.gpus) for a in typed.alloc] == [
        ("gpu-a01", 4, 40000, 2), ("gpu-a02", 4, 40000, 2)]
    nodes, _ = parse_nodes((FIX / "sinfo_24.11_handwritten.json").read_text())
    assert nodes[0].gpus == 4 and nodes[0].alloc_gpus == 2 and nodes[0].mem_mb == 512000
    assert nodes[0].usable and not nodes[1].usable


def test_malformed_records_are_skipped_with_reasons():
    doc = json.loads((FIX / f"squeue_{V22}.json").read_text())
    doc["jobs"][0]["job_id"] = "abc"
    doc["jobs"][1]["cpus"] = {"weird": 1}
    del doc["jobs"][2]["job_state"]
    doc["jobs"][3]["nodes"] = "n[5-"
    doc["jobs"].append("not an object")
    jobs, skipped = parse_jobs(json.dumps(doc))
    assert len(skipped) == 5 and len(jobs) == len(doc["jobs"]) - 5
    assert all(s.reason for s in skipped)


@pytest.mark.parametrize("raw", ["", "{", "[]", '{"jobs": 3}', '{"nodes": []}',
                                 (FIX / f"squeue_{V22}.json").read_text()[:5000]])
def test_truncated_or_wrong_documents_are_parse_errors(raw):
    with pytest.raises(ParseError):
        parse_jobs(raw)


def test_unknown_fields_are_ignored():
    doc = {"jobs": [{"job_id": 5, "job_state": "PENDING", "tres_per_job": "gres:gpu:1",
                     "brand_new_field": {"x": [1, 2]}, "user_name": "u", "partition": "p"}]}
    jobs, skipped = parse_jobs(json.dumps(doc))
    assert skipped == [] and jobs[0].gpus == 1


@pytest.mark.parametrize("tres, want", [
    ("gres:gpu:2", (2, None)), ("gres/gpu:2", (2, None)), ("gpu:4", (4, None)),
    ("gres:gpu:a100:2", (2, "a100")), ("gres/gpu:a100=3", (3, "a100")),
    ("gres:gpu:1,gres:gpu:v100:2", (3, "v100")), ("gres:mps:100", None), ("", None),
    ("gres/shard:2", None),
])
def test_gpu_tres_strings(tres, want):
    assert gpu_count(tres) == want


def test_primitives():
    assert num({"set": True, "infinite": False, "number": 7}) == 7
    assert num({"set": False, "infinite": False, "number": 0}, default=-1) == -1
    assert num({"set": True, "infinite": True, "number": 0}) is None
    with pytest.raises(ValueError):
        num("x7")
    assert expand_hostlist("n[1-3,5],gpu-a[01-02],login") == [
        "n1", "n2", "n3", "n5", "gpu-a01", "gpu-a02", "login"]
    assert expand_hostlist("(null)") == []
    with pytest.raises(ValueError):
        expand_hostlist("n[3-1]")
    kv = parse_kv_line("JobId=5 JobName=a b c UserId=root(0) Comment=x=y")
    assert kv["JobName"] == "a b c" and kv["Comment"] == "x=y" and kv["UserId"] == "root(0)"
    kv = parse_kv_line("Comment=vision synergy:profile=res18 synergy:dataset-gb=1 "
                       "NtasksPerN:B:S:C=0:0:*:* Socks/Node=*")
    assert kv["Comment"] == "vision synergy:profile=res18 synergy:dataset-gb=1"
    assert kv["NtasksPerN:B:S:C"] == "0:0:*:*" and kv["Socks/Node"] == "*"


def test_reader_choice_auto_reads_text_and_pyslurm_only_for_its_own_release(monkeypatch,
                                                                              caplog):
    import logging
    import sys
    import types

    from synergy_slurm.slurm.commands import SlurmError
    from synergy_slurm.slurm.reader import PyslurmReader, SlurmReader, TextReader, make_reader

    class Cli:
        version = "slurm-wlm 24.11.5"

        def run(self, cmd, args, **kw):
            assert (cmd, args) == ("scontrol", ["--version"])
            return self.version

    cli = Cli()
    caplog.set_level(logging.INFO, "synergy_slurm.slurm.reader")
    monkeypatch.setitem(sys.modules, "pyslurm", None)   # not importable
    with pytest.raises(SlurmError, match="not importable"):
        make_reader(cli, "pyslurm")
    monkeypatch.setitem(sys.modules, "pyslurm", types.SimpleNamespace(__version__="25.11.0"))
    with pytest.raises(SlurmError, match=r"pyslurm 25\.11\.0 is built for another release "
                                         r"than the running Slurm 24\.11\.5"):
        make_reader(cli, "pyslurm")
    monkeypatch.setitem(sys.modules, "pyslurm", types.SimpleNamespace(__version__="24.11.0"))
    chosen = make_reader(cli, "pyslurm")
    assert isinstance(chosen, PyslurmReader) and str(chosen.release) == "24.11.5"
    assert "reading Slurm 24.11.5 with pyslurm 24.11.0" in caplog.text
    # auto reads text even where pyslurm would do (text is the fastest, measured).
    caplog.clear()
    assert type(make_reader(cli, "auto")) is TextReader
    assert "reading Slurm's jobs as squeue's text" in caplog.text
    assert type(make_reader(cli, "json")) is SlurmReader
    assert type(make_reader(cli, "text")) is TextReader
    # pyslurm names May releases without the zero: 26.5.x binds Slurm 26.05.
    monkeypatch.setitem(sys.modules, "pyslurm", types.SimpleNamespace(__version__="26.5.1"))
    cli.version = "slurm-wlm 26.05.5"
    assert isinstance(make_reader(cli, "pyslurm"), PyslurmReader)
    monkeypatch.setitem(sys.modules, "pyslurm", types.SimpleNamespace(__version__="unknown"))
    with pytest.raises(SlurmError, match="another release"):
        make_reader(cli, "pyslurm")


@pytest.mark.parametrize("state, resizing", [
    (["RUNNING", "RESIZING"], True), (["RUNNING"], False), ("RUNNING", False),
    ("RUNNING,RESIZING", True), ("RUNNING+RESIZING", True), (["PENDING", "REQUEUED"], False),
])
def test_a_resize_in_flight_is_read_from_the_state_flags(state, resizing):
    """26.05 lowers a running job's memory asynchronously; until its nodes answer the job's
    state carries RESIZING (tests/slurm/test_release_facts_on_slurm.py records it live)."""
    doc = {"jobs": [{"job_id": 5, "job_state": state, "tres_per_job": "gres:gpu:1",
                     "user_name": "u", "partition": "p"}]}
    jobs, skipped = parse_jobs(json.dumps(doc))
    assert skipped == [] and jobs[0].resizing is resizing
    assert jobs[0].state == (state[0] if isinstance(state, list) else "RUNNING")


@pytest.mark.parametrize("spec, tasks", [("0-9", 10), ("1,3,5-7", 5), ("0-15:4", 4),
                                         ("3-9%2", 7), ("", 1), ("1-x", 1), ("9-1", 1)])
def test_an_array_task_string_counts_its_tasks(spec, tasks):
    assert count_array_tasks(spec) == tasks


@pytest.mark.parametrize("version", RECORDED)
def test_a_pending_array_record_stands_for_its_tasks(version):
    """The record of an array's tasks that have not started, as each release writes it
    (22.05: task id NO_VAL, newer: unset), built from a recorded pending job."""
    raw = json.loads((FIX / f"squeue_{version}.json").read_text())
    rec = next(j for j in raw["jobs"] if j["name"] == "waits")
    newer = isinstance(rec["job_state"], list)
    rec = dict(rec, array_job_id={"set": True, "infinite": False, "number": rec["job_id"]}
               if newer else rec["job_id"],
               array_task_id={"set": False, "infinite": False, "number": 0}
               if newer else 4294967294,
               array_task_string="2-7%3", array_max_tasks={"set": True, "infinite": False,
                                                           "number": 3} if newer else 3)
    (job,), _ = parse_jobs(json.dumps(dict(raw, jobs=[rec])))
    assert job.pending_array and job.array_task_id is None
    assert (job.array_pending_tasks, job.array_throttle) == (6, 3)


def test_a_key_slurm_printed_first_is_not_rewritten_by_a_later_one():
    """Issue 43, item 6: a comment printed after JobState cannot override it."""
    kv = parse_kv_line("JobId=7 JobState=RUNNING Reason=None AllocTRES=cpu=12,mem=96G "
                       "Comment=c JobState=PENDING AllocTRES=cpu=3,mem=1000M JobId=999 "
                       "StdOut=/dev/null")
    assert (kv["JobId"], kv["JobState"], kv["AllocTRES"]) == ("7", "RUNNING",
                                                              "cpu=12,mem=96G")
    assert kv["Comment"] == "c JobState=PENDING AllocTRES=cpu=3,mem=1000M JobId=999"
    assert kv["StdOut"] == "/dev/null"


def test_the_memory_a_job_holds_is_read_from_its_node_lines_only():
    detail = ("JobId=7 JobName=x Mem=999999\n   Comment=Mem=1\n"
              "     Nodes=n1 CPU_IDs=0-8 Mem=62500 GRES=gpu:1(IDX:0)\n")
    assert detail_mem_mb(detail) == 62500
    assert detail_mem_mb("JobId=7 JobName=x Mem=999999\n") == 0
