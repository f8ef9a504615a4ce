"""The text reader on a live Slurm, on every release: the same snapshot as the JSON reader,
field by field, for every kind of job the controller meets, and a comment that tries to
forge a record read as the comment it is."""

from __future__ import annotations

import dataclasses
import time

import pytest

from synergy_slurm.slurm.reader import SlurmReader, TextReader

from .helpers import cancel_all, submit

pytestmark = pytest.mark.slurm
KINDS = {
    "multinode": ["-N2", "--gpus-per-node=2"],
    "uneven": ["--gpus=9", "-N2"],
    "pertask": ["-n2", "--gpus-per-task=1"],
    "memnode": ["--gpus=1", "--mem=10G", "--no-requeue"],
    "array": ["--array=0-3%2", "--gpus=1"],
    "gpus2": ["--gpus=2", "--cpus-per-gpu=3", "--mem-per-gpu=2G"],
    "held": ["--hold", "--gpus=1"],
    "nogpu": ["-c2", "--mem=1G"],
    "limit": ["-t", "30", "--gpus=1"],
    "memcpu": ["--mem-per-cpu=1G", "-c4"],
    "bigarr": ["--array=0-9", "--gpus=8"],
    "evil~name": ["--gpus=1", "--comment=synergy:profile=res18\n1~0~RUNNING~0~E"],
}


def _as_dicts(snap) -> dict[int, dict]:
    return {j.job_id: dataclasses.asdict(j) for j in snap.jobs}


def test_the_text_reader_reads_what_the_json_reader_reads(slurm_cli, tmp_path):
    cli = slurm_cli
    cancel_all(cli)
    tmp_path.chmod(0o755)
    for name, opts in KINDS.items():
        submit(cli, "sleep 300", f"--job-name={name}", "-o", "/dev/null", *opts, tmp=tmp_path)
    het = tmp_path / "het.sh"
    het.write_text("#!/bin/sh\nsleep 300\n")
    cli.run("sbatch", ["--job-name=het", "-o", "/dev/null", "--gpus=1", ":", "-c1", str(het)])
    time.sleep(3)                      # the scheduler's first pass: some run, some wait
    by_json = SlurmReader(cli)
    try:
        for _ in range(5):             # a job that changes between the reads: read again
            before = by_json.snapshot()
            text = TextReader(cli, by_json.release)
            calls = cli.calls
            got = text.snapshot()
            text_calls = cli.calls - calls
            after = by_json.snapshot()
            if _as_dicts(before) == _as_dicts(after):
                break
            time.sleep(1)
        else:
            pytest.fail("the jobs kept changing between two JSON reads")
        names = {j.name for j in got.jobs}
        assert set(KINDS) | {"het"} <= names
        assert {"RUNNING", "PENDING"} <= {j.state for j in got.jobs}
        assert _as_dicts(got) == _as_dicts(before)
        assert got.nodes == before.nodes and got.partitions == before.partitions
        assert got.skipped == () and got.version == before.version
        evil = next(j for j in got.jobs if j.name == "evil~name")
        assert evil.comment == "synergy:profile=res18\n1~0~RUNNING~0~E"
        # The layout of the jobs on several nodes is read once (text, JSON, nodes,
        # partitions), and known again the next round (text, nodes, partitions).
        assert text_calls == 4
        # The next round, against a JSON read around it (a scheduler pass between two reads
        # changes a pending job's reason or priority: ci8 saw it under load).
        for _ in range(5):
            before = by_json.snapshot()
            calls = cli.calls
            again = text.snapshot()
            again_calls = cli.calls - calls
            if _as_dicts(by_json.snapshot()) == _as_dicts(before):
                break
            time.sleep(1)
        else:
            pytest.fail("the jobs kept changing between two JSON reads")
        assert _as_dicts(again) == _as_dicts(before)
        assert again_calls == 3
    finally:
        cancel_all(cli)
