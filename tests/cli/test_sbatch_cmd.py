"""synergy-sbatch: its own options, pass-through, errors before submitting (real submits:
test_sbatch_on_slurm.py, test_sbatch_users_on_slurm.py)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from click.testing import CliRunner

from synergy_slurm.cli.sbatch_cmd import build_argv, dataset_gb, main
from synergy_slurm.hook.sbatch_args import script_index
from synergy_slurm.hook.table import TABLE_NAME, HookTable


def test_argv_keeps_sbatch_options_and_merges_the_comment():
    argv = build_argv("sbatch", ["-p", "gpu", "--comment", "my run", "--gpus=2", "job.sh",
                                 "--lr", "0.1"], "res18", 120.0, True, False)
    assert argv == ["sbatch", "--comment=my run synergy:profile=res18 synergy:dataset-gb=120 "
                    "synergy:requeue-ok", "--requeue", "--open-mode=append", "-p", "gpu",
                    "--gpus=2", "job.sh", "--lr", "0.1"]
    assert build_argv("sbatch", ["job.sh"], None, None, False, True) == [
        "sbatch", "--comment=synergy:off", "job.sh"]
    assert build_argv("sbatch", ["--wrap=hostname"], None, None, False, False) == [
        "sbatch", "--wrap=hostname"]
    # Slurm's binary units, in synergy's GB of 1000 MB: 1.5T is 1,572,864 MB.
    assert dataset_gb("500M") == pytest.approx(0.5)
    assert dataset_gb("1.5T") == pytest.approx(1572.864)
    assert dataset_gb("120G") == pytest.approx(122.88) and dataset_gb("80") == 80


@pytest.mark.parametrize("args, index", [
    (["job.sh"], 0), (["--requeue", "job.sh", "-o", "x"], 1), (["-o", "out", "job.sh"], 2),
    (["-n4", "-H", "--gpus", "2", "job.sh"], 4), (["--exclusive", "--mem=1G", "j"], 2),
    (["--wrap", "hostname"], None), (["-p", "gpu", "--", "job.sh"], 3),
])
def test_the_script_is_found_among_sbatch_options(args, index):
    assert script_index(args) == index


def test_only_sbatch_comments_are_merged(tmp_path):
    # The script's own --comment argument is not sbatch's and stays where it was.
    assert build_argv("sbatch", ["--gpus=1", "job.sh", "--comment", "x"], "res18", None,
                      False, False) == [
        "sbatch", "--comment=synergy:profile=res18", "--gpus=1", "job.sh", "--comment", "x"]
    # A script's #SBATCH --comment survives --profile-key (sbatch would let ours replace it).
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH --comment='team vision'\n#SBATCH --gpus=2\nrun\n")
    res = CliRunner().invoke(main, ["--dry-run", "--profile-key", "res18", str(script)])
    assert res.exit_code == 0, res.output
    assert "'--comment=team vision synergy:profile=res18'" in res.output


def test_options_after_the_script_are_the_scripts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.sh").write_text("#!/bin/sh\ntrue\n")
    res = CliRunner().invoke(main, ["--dry-run", "-o", "out", "--requeue-ok", "train.sh",
                                    "--profile-key", "x", "--dry-run", "--no-synergy"])
    assert res.exit_code == 0, res.output
    assert res.output.strip().endswith(
        "sbatch --comment=synergy:requeue-ok --requeue --open-mode=append -o out train.sh "
        "--profile-key x --dry-run --no-synergy")


@pytest.mark.parametrize("args, message", [
    (["--profile-key", "bad key!", "job.sh"], "--profile-key"),
    (["--dataset-size", "lots", "job.sh"], "expected a size"),
    (["--dataset-size", "0G", "job.sh"], "must be positive"),
    (["--no-synergy", "--profile-key", "res18", "job.sh"], "cannot be combined"),
    (["--requeue-ok", "--no-requeue", "job.sh"], "conflicts with --no-requeue"),
])
def test_bad_options_fail_before_submitting(args, message, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text("#!/bin/sh\ntrue\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("submitted"))
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and message in res.output


def test_dry_run_prints_the_command_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "j.sh").write_text("#!/bin/sh\ntrue\n")
    res = CliRunner().invoke(main, ["--dry-run", "--profile-key", "res18", "--gpus=1", "j.sh"])
    assert res.exit_code == 0
    assert res.output.strip().endswith("sbatch --comment=synergy:profile=res18 --gpus=1 j.sh")


def test_explain_json_has_the_hook_and_controller_views(tmp_path, profiles_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(f'[hook]\ndir = "{tmp_path}"\nstate_dir = "{tmp_path}"\n[profiles]\n'
                   f'file = "{profiles_path}"\n'
                   f'store = "{tmp_path / "none.db"}"\n')
    args = ["--explain", "--format", "json", "--config", str(cfg), "--profile-key", "alexnet",
            "--gpus=1", "job.sh"]
    (tmp_path / "job.sh").write_text("#!/bin/sh\ntrue\n")
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["hook"]["managed"] is False and "no hook table" in info["hook"]["reason"]
    assert info["controller"]["profile_known"] is True
    assert info["controller"]["ideal_cpus_per_gpu"] == 12
    # Without a table the proportional share is unknown here: no made-up speedup, and a
    # note says how to get a table.
    assert info["controller"]["speedup_at_ideal"] is None
    assert any("synergy hook export" in n for n in info["notes"])
    assert not (tmp_path / "none.db").exists()      # explain creates nothing
    HookTable(generated_at=int(time.time()), node_cpus=24, node_mem_mb=500000,
              node_gpus=8).write(tmp_path / TABLE_NAME)
    info = json.loads(CliRunner().invoke(main, args).output)
    assert info["controller"]["speedup_at_ideal"] == pytest.approx(2.94)
    assert info["hook"]["managed"] is True and info["notes"] == []


@pytest.mark.parametrize("option, named", [
    ("-c8", "-c/--cpus-per-task"), ("--cpus-per-task=8", "-c/--cpus-per-task"),
    ("--mem-per-cpu=4G", "--mem-per-cpu"), ("--ntasks-per-node=2", "--ntasks-per-node"),
    ("--exclusive", "--exclusive"), ("--mem=0", "--mem=0")])
def test_explain_says_a_job_with_its_own_cores_or_memory_is_left_as_submitted(
        tmp_path, option, named):
    from synergy_slurm.hook.rules import decide
    from synergy_slurm.hook.sbatch_args import submission_from_args
    from synergy_slurm.hook.table import HookTable

    table = HookTable(generated_at=int(time.time()), node_cpus=24, node_mem_mb=500000,
                      node_gpus=8, partitions=("gpu",), default_partition="gpu",
                      profiles={"res18": (9, 62500)}, max_age_s=120)
    sub = submission_from_args(["--gpus=2", option, "--comment=synergy:profile=res18",
                                "job.sh"])
    d = decide(table, sub, time.time())
    assert not d.managed and d.cpus_per_gpu is None
    assert d.reason == f"not reshaped: {named} sets the job's cores or memory itself: left " \
                       "as submitted"
    assert decide(table, submission_from_args(["--gpus=2", "--mem=10G", "job.sh"]),
                  time.time()).managed
