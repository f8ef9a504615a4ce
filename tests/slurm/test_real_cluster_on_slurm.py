"""The adapter against the real 4-node test cluster (fake GPUs, Debian's Slurm)."""

from __future__ import annotations

import time

import pytest

from synergy_slurm.devcluster import release_info
from synergy_slurm.slurm.reader import SlurmReader
from synergy_slurm.slurm.writer import NotEnforcing, Shape, SlurmWriter

from .helpers import cancel_all, job_fields, per_gpu, submit, wait_file, wait_for

pytestmark = pytest.mark.slurm

# What the job sees: its cores from the environment, its memory as slurmd enforces it
# (scontrol show job -d, "Mem=" of its node: no environment variable carries an updated
# MemPerTres), and its restart count.
REPORT = ('mem=$(scontrol show job -d "$SLURM_JOB_ID" | grep -o " Mem=[0-9]*" | head -1 '
          '| cut -d= -f2); echo "cpus=$SLURM_CPUS_ON_NODE mem=$mem '
          'restarts=${SLURM_RESTART_COUNT:-0}"')


@pytest.fixture(autouse=True)
def clean(slurm_cli):
    cancel_all(slurm_cli)
    yield
    cancel_all(slurm_cli)


def test_cluster_shape(slurm_cli, slurm_cluster):
    snap = SlurmReader(slurm_cli).snapshot()
    assert snap.version == release_info(slurm_cluster)["version"]
    assert sorted(n.name for n in snap.nodes) == ["n1", "n2", "n3", "n4"]
    assert all((n.cpus, n.mem_mb, n.gpus) == (24, 500000, 8) and n.usable for n in snap.nodes)
    part = snap.partitions[0]
    assert (part.def_cpu_per_gpu, part.def_mem_per_gpu_mb) == (3, 62500)


def test_held_job_reshaped_starts_with_exactly_the_new_shape(slurm_cli, tmp_path):
    out = tmp_path / "held.out"
    job_id = submit(slurm_cli, REPORT, "--hold", "--gpus=2", "-o", str(out), tmp=tmp_path)
    reader = SlurmReader(slurm_cli)
    job = next(j for j in reader.snapshot().jobs if j.job_id == job_id)
    assert job.held and job.gpus == 2
    writer = SlurmWriter(slurm_cli, enforce=True)
    fields = writer.reshape_pending(job, Shape(cpus_per_gpu=5, mem_per_gpu_mb=30000))
    assert per_gpu(fields, "CpusPerTres") == 5 and fields["NumCPUs"] == "10"
    writer.release(job_id)
    wait_for(slurm_cli, job_id, {"COMPLETED"})
    assert "cpus=10 mem=60000 restarts=0" in out.read_text()


def test_lowering_a_held_job_works_too(slurm_cli, tmp_path):
    out = tmp_path / "low.out"
    job_id = submit(slurm_cli, REPORT, "--hold", "--gpus=1", "--cpus-per-gpu=12",
                    "-o", str(out), tmp=tmp_path)
    job = next(j for j in SlurmReader(slurm_cli).snapshot().jobs if j.job_id == job_id)
    writer = SlurmWriter(slurm_cli, enforce=True)
    writer.reshape_pending(job, Shape(cpus_per_gpu=4, mem_per_gpu_mb=20000))
    writer.release(job_id)
    wait_for(slurm_cli, job_id, {"COMPLETED"})
    assert "cpus=4 mem=20000 restarts=0" in out.read_text()


def test_running_job_requeued_into_a_larger_shape(slurm_cli, tmp_path):
    out = tmp_path / "rq.out"
    job_id = submit(slurm_cli, REPORT + "; sleep 300", "--gpus=1", "--cpus-per-gpu=2",
                    "--mem-per-gpu=8G", "--requeue", "--open-mode=append", "-o", str(out),
                    tmp=tmp_path)
    wait_for(slurm_cli, job_id, {"RUNNING"})
    wait_file(out, "restarts=0")
    job = next(j for j in SlurmReader(slurm_cli).snapshot().jobs if j.job_id == job_id)
    assert job.running and job.cpus == 2
    SlurmWriter(slurm_cli, enforce=True).requeue_reshape(job, Shape(6, 10000), timeout_s=60)
    text = wait_file(out, "restarts=1", timeout_s=90)
    assert "cpus=6 mem=10000 restarts=1" in text
    after = next(j for j in SlurmReader(slurm_cli).snapshot().jobs if j.job_id == job_id)
    assert after.running and after.cpus == 6 and after.restarts == 1


def test_multi_node_and_non_gpu_jobs_read_back(slurm_cli, tmp_path):
    multi = submit(slurm_cli, "sleep 300", "-N2", "--gpus-per-node=8", "-o", "/dev/null",
                   tmp=tmp_path)
    plain = submit(slurm_cli, "sleep 300", "-c2", "-o", "/dev/null", tmp=tmp_path)
    wait_for(slurm_cli, multi, {"RUNNING"})
    wait_for(slurm_cli, plain, {"RUNNING"})
    snap = SlurmReader(slurm_cli).snapshot()
    m = snap.job(multi)
    p = snap.job(plain)
    assert m is not None and p is not None
    assert (m.gpus, m.gpus_per_node, m.num_nodes, len(m.nodes)) == (16, 8, 2, 2)
    assert [a.gpus for a in m.alloc] == [8, 8] and [a.cpus for a in m.alloc] == [24, 24]
    assert not p.has_gpus and p.cpus == 2
    busy = [n for n in snap.nodes if n.name in m.nodes]
    assert all(n.alloc_gpus == 8 for n in busy)


def test_writer_refuses_unless_enforcing(slurm_cli, tmp_path):
    job_id = submit(slurm_cli, "true", "--hold", "--gpus=1", "-o", "/dev/null", tmp=tmp_path)
    job = SlurmReader(slurm_cli).snapshot().job(job_id)
    writer = SlurmWriter(slurm_cli, enforce=False)
    with pytest.raises(NotEnforcing):
        writer.reshape_pending(job, Shape(4, 1000))
    assert "CpusPerTres" not in job_fields(slurm_cli, job_id) or \
        job_fields(slurm_cli, job_id)["CpusPerTres"] != "gres:gpu:4"


def test_a_pending_arrays_record_says_how_many_tasks_it_stands_for(slurm_cli, tmp_path):
    """A held array of six tasks, two at a time (%2): its pending record counts six tasks
    and the throttle on every release (22.05 writes the record's task id as NO_VAL); once
    two tasks run, the record counts the four left."""
    jid = submit(slurm_cli, "sleep 60", "--hold", "--array=0-5%2", "--gpus=1", "-o",
                 "/dev/null", tmp=tmp_path)
    (rec,) = [j for j in SlurmReader(slurm_cli).snapshot().jobs if j.array_job_id == jid]
    assert rec.pending_array and rec.array_task_id is None
    assert (rec.array_pending_tasks, rec.array_throttle) == (6, 2)
    SlurmWriter(slurm_cli, enforce=True).release(jid)
    for _ in range(60):
        jobs = [j for j in SlurmReader(slurm_cli).snapshot().jobs if j.array_job_id == jid]
        if sum(j.running for j in jobs) == 2:
            break
        time.sleep(0.5)
    (rec,) = [j for j in jobs if j.pending]
    assert sum(j.running for j in jobs) == 2
    assert rec.pending_array and (rec.array_pending_tasks, rec.array_throttle) == (4, 2)


def test_a_lowering_slurm_reads_back_and_then_ignores_is_caught_when_the_job_starts(
        slurm_cli, tmp_path):
    """22.05 shows a lowering of a job its scheduler already evaluated (CpusPerTres and
    NumCPUs read back as asked, so the writer calls it done) and then starts the job with
    the cores it cached. The job's allocation tells: LoweredWatch reports it as ignored.
    Where the release honours the lowering (26.05), the job starts lowered and nothing is
    reported. (Issue 45, item 11: a lowering Slurm ignored is never left as done.)"""
    from synergy_slurm.controller.lowered import LoweredWatch
    from synergy_slurm.slurm.release import Release

    reader = SlurmReader(slurm_cli)
    release = Release.parse(reader.snapshot().version)
    if not release.lowers_pending and release.at_least(23, 2):
        # Seen on 24.11.5: the lowered job then stays pending (Resources) with a node free;
        # the controller never lowers a job Slurm has evaluated there (lowers_pending is
        # for 26.05 on; before it only held jobs are shaped), so nothing is left to watch.
        pytest.skip(f"Slurm {release}: a lowered evaluated job does not start; the "
                    "controller does not lower one on this release")
    # Fill every node so that the next job waits for resources (evaluated, not held).
    filler = [submit(slurm_cli, "sleep 300", "--gpus=8", "--cpus-per-gpu=3",
                     "--mem-per-gpu=1000", tmp=tmp_path) for _ in range(4)]
    for j in filler:
        wait_for(slurm_cli, j, {"RUNNING"})
    job_id = submit(slurm_cli, "sleep 30", "--gpus=1", "--cpus-per-gpu=8",
                    "--mem-per-gpu=4000", tmp=tmp_path)
    deadline = time.monotonic() + 60
    while job_fields(slurm_cli, job_id).get("Reason") != "Resources":
        assert time.monotonic() < deadline, job_fields(slurm_cli, job_id)
        time.sleep(0.5)
    job = next(j for j in reader.snapshot().jobs if j.job_id == job_id)
    writer = SlurmWriter(slurm_cli, enforce=True)
    fields = writer.reshape_pending(job, Shape(cpus_per_gpu=2, mem_per_gpu_mb=3000))
    assert per_gpu(fields, "CpusPerTres") == 2          # read back: looks done
    watch = LoweredWatch()
    watch.note(job_id, Shape(8, 4000), Shape(2, 3000))
    slurm_cli.run("scancel", [str(filler[0])])
    wait_for(slurm_cli, job_id, {"RUNNING"})
    snap = reader.snapshot()
    found = watch.check(snap.jobs)
    if Release.parse(snap.version).lowers_pending:
        assert found == []
    else:
        (ignored,) = found
        assert ignored.held_cpus == 8 and "ignored" in ignored.why
    assert len(watch) == 0
