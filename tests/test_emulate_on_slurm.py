"""The emulated training job reads the share Slurm gave it on its own node, as a real job's
processes there would: a job spread over nodes has its cores and GPUs on each."""

from __future__ import annotations

import sys

import pytest

from .slurm.helpers import cancel_all, submit, wait_file, wait_for

pytestmark = pytest.mark.slurm


def test_a_job_spread_over_two_nodes_reads_its_cores_per_gpu_on_its_node(
        slurm_cluster, slurm_cli, tmp_path, monkeypatch):
    cancel_all(slurm_cli)
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf_path))
    out = tmp_path / "share.out"
    script = (f"env | grep -E '^SLURM_(GPUS|CPUS)' ; scontrol show job -d $SLURM_JOB_ID ; "
              f"{sys.executable} -c 'from synergy_slurm.emulate import granted_share; "
              f"print(\"share\", *granted_share())'")
    job = submit(slurm_cli, script, "-N2", "--ntasks-per-node=1", "--gpus=2",
                 "--cpus-per-gpu=3", "--mem-per-gpu=1000", f"--output={out}", tmp=tmp_path)
    wait_for(slurm_cli, job, {"COMPLETED", "FAILED"}, timeout_s=60)
    text = wait_file(out, "share")
    share = next(line.split()[1:] for line in text.splitlines() if line.startswith("share"))
    # 3 cores and 1 GPU on each node: 3 cores per GPU, 1 GB per GPU, 1 GPU here (the job's
    # SLURM_GPUS is 2: read instead of SLURM_GPUS_ON_NODE it would halve the cores).
    assert (int(share[0]), float(share[1]), int(share[2])) == (3, 1.0, 1), text
