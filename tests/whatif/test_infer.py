"""A job's class from what it used (whatif/infer.py's documented rule), and keys a site
would recognise, ranked by GPU-hours."""

from __future__ import annotations

from dataclasses import replace

import pytest

from synergy_slurm.slurm.sacct import HistoryJob
from synergy_slurm.slurm.sacct_usage import JobUsage
from synergy_slurm.whatif.infer import candidates, infer_class, key_of


def use(job_id=1, core_use=0.5, elapsed=3600.0, cpus=4, gpu_util=None) -> JobUsage:
    return JobUsage(job_id, elapsed, cpus, core_use * elapsed * cpus, 1000.0, gpu_util)


@pytest.mark.parametrize("core_use, gpu_util, cls", [
    (0.95, None, "image"), (0.9, 0.4, "image"), (0.9, 0.95, "speech"),
    (0.6, None, "speech"), (0.35, None, "language"), (0.05, 0.99, "language")])
def test_the_rule(core_use, gpu_util, cls):
    assert infer_class(use(core_use=core_use, gpu_util=gpu_util))[0] == cls


def test_what_says_nothing_gives_no_class():
    assert infer_class(use(elapsed=30)) == (None, "ran 30 s, under 60 s")
    assert infer_class(JobUsage(1, 3600, 4, None))[0] is None


def hjob(jid, user, name, gpus=1, hours=1.0) -> HistoryJob:
    return HistoryJob(jid, user, "a", "gpu", name, "", "COMPLETED", 0.0, 0.0, 0.0,
                      hours * 3600, gpus, 4, 1000.0)


def test_keys_are_job_names_ranked_by_gpu_hours_with_the_class_most_agree_on():
    jobs = [hjob(1, "ann", "train vit", gpus=2), hjob(2, "ann", "train vit", gpus=2),
            hjob(3, "ann", "train vit"), hjob(4, "bob", "bert", gpus=8),
            hjob(5, "cy", "never", hours=0.0)]
    usage = {1: use(1, 0.95), 2: use(2, 0.95), 3: use(3, 0.2), 4: use(4, 0.1)}
    found = candidates(jobs, usage)
    assert [(c.key, c.jobs, c.gpu_hours, c.cls) for c in found] == [
        ("bert", (4,), 8.0, "language"), ("train_vit", (1, 2, 3), 5.0, "image")]
    assert found[1].agree == pytest.approx(0.8)


def test_a_shared_name_is_one_key_and_generic_names_go_by_user_and_script():
    """One key per job name across users (with the users); ``python``, ``train.sh``, a
    notebook: by user and the script the submit line names, else by user; never a key
    per job; the command is the job's own where sacct kept it."""
    line = "sbatch --gpus=1 -c 8 /home/ann/exp/finetune.sh --lr 3e-4"
    jobs = [hjob(1, "ann", "nerf"), hjob(2, "bob", "nerf"), hjob(3, "cy", "nerf"),
            replace(hjob(4, "ann", "python"), submit_line=line),
            replace(hjob(5, "ann", "python"), submit_line=line),
            hjob(6, "bob", "python"), hjob(7, "bob", "python"),
            hjob(8, "cy", "sys/dashboard/sys/jupyter"), hjob(9, "cy", "train.sh")]
    found = {c.key: c for c in candidates(jobs, {})}
    assert set(found) == {"nerf", "ann.finetune.sh", "bob.python",
                          "cy.sys_dashboard_sys_jupyter", "cy.train.sh"}
    assert found["nerf"].users == ("ann", "bob", "cy") and found["nerf"].jobs == (1, 2, 3)
    assert found["ann.finetune.sh"].command == "/home/ann/exp/finetune.sh --lr 3e-4"
    assert found["bob.python"].jobs == (6, 7) and found["bob.python"].command == ""
    assert key_of(hjob(9, "x", "a/b;rm -rf")) == "a_b_rm_-rf"
