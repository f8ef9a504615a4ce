"""Every synergy-sbatch option against the real cluster with the hook in slurmctld: what
reaches Slurm, what the hook makes of it, and bad input that must submit nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from synergy_slurm.hook.table import TABLE_NAME
from synergy_slurm.slurm.parse import gpu_count

from ..conftest import slurm_section
from ..hook.test_hook_on_slurm import make_table
from ..slurm.helpers import cancel_all, job_fields, per_gpu, wait_file, wait_for

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
REPORT = "#!/bin/sh\necho cpus=$SLURM_CPUS_ON_NODE args=$*\n"


@pytest.fixture
def sbatch(slurm_cluster, slurm_cli, tmp_path):
    """Run the installed synergy-sbatch against the test cluster, with the hook's table
    written (known: res18 -> 9 cores/GPU; jobs without a profile are held)."""
    exe = shutil.which("synergy-sbatch", path=str(REPO / ".venv" / "bin")) or \
        shutil.which("synergy-sbatch")
    assert exe, "synergy-sbatch not installed"
    cancel_all(slurm_cli)
    table = slurm_cluster.etc / TABLE_NAME
    make_table(hold_unknown=True).write(table)
    env = dict(os.environ, SLURM_CONF=str(slurm_cluster.conf_path))
    env.pop("SYNERGY_TEMPLATES", None)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([exe, *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=60, check=False)

    yield run
    table.unlink(missing_ok=True)
    cancel_all(slurm_cli)


def queued(cli) -> list[str]:
    return cli.run("squeue", ["-h", "-o", "%A"]).split()


def fields(cli, job_id: int) -> dict[str, str]:
    return job_fields(cli, job_id)


def test_synergy_options_reach_slurm_and_the_hook(sbatch, slurm_cli, tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(REPORT)
    # --profile-key, --dataset-size, --requeue-ok: comment tokens, requeue, hook shape.
    res = sbatch("--parsable", "--profile-key", "res18", "--dataset-size", "120G",
                 "--requeue-ok", "--gpus=1", "-o", str(tmp_path / "a.out"), str(script),
                 "--comment", "x")
    assert res.returncode == 0, res.stderr
    a = int(res.stdout.strip())
    fa = wait_for(slurm_cli, a, {"COMPLETED"})
    assert fa["Comment"] == ("synergy:profile=res18 synergy:dataset-gb=122.88 "
                             "synergy:requeue-ok")
    assert fa["Requeue"] == "1" and per_gpu(fa, "CpusPerTres") == 9
    # The script's own arguments reach it unchanged, even one spelled like an option.
    assert "cpus=9 args=--comment x" in wait_file(tmp_path / "a.out", "cpus=")
    # --no-synergy: the hook leaves it alone (no hold though it has no profile) ...
    res = sbatch("--parsable", "--no-synergy", "--gpus=1", "-o", str(tmp_path / "b.out"),
                 str(script))
    assert res.returncode == 0, res.stderr
    b = int(res.stdout.strip())
    fb = wait_for(slurm_cli, b, {"COMPLETED"})
    assert fb["Comment"] == "synergy:off" and "synergy.managed" not in fb.get(
        "AdminComment", "")
    assert "cpus=3" in wait_file(tmp_path / "b.out", "cpus=")
    # ... where the same job without it is held for the controller (hold_unknown).
    res = sbatch("--parsable", "--gpus=1", "-o", "/dev/null", str(script))
    c = int(res.stdout.strip())
    fc = fields(slurm_cli, c)
    assert fc["JobState"] == "PENDING" and fc["Priority"] == "0"


def test_templates_on_the_cluster(sbatch, slurm_cli, tmp_path):
    tdir = tmp_path / "templates"
    tdir.mkdir()
    (tdir / "hello.sbatch").write_text(
        "#!/bin/sh\n# synergy-template: says hello\n# synergy-var: WHO    who to greet\n"
        "# synergy-var: TIMES=2  how often\n#SBATCH --gpus=1\n"
        "for i in $(seq {{TIMES}}); do echo hello {{WHO}} cpus=$SLURM_CPUS_ON_NODE; done\n")
    listed = sbatch("--template-dir", str(tdir), "--list-templates")
    assert listed.returncode == 0
    assert "hello: says hello" in listed.stdout and "pytorch-torchrun:" in listed.stdout
    out = tmp_path / "h.out"
    res = sbatch("--parsable", "--template-dir", str(tdir), "--template", "hello",
                 "--var", "WHO=slurm", "--var", "TIMES=3", "--profile-key", "res18",
                 "-o", str(out))
    assert res.returncode == 0, res.stderr
    jid = int(res.stdout.strip())
    f = wait_for(slurm_cli, jid, {"COMPLETED"})
    assert per_gpu(f, "CpusPerTres") == 9         # #SBATCH --gpus=1 from the template
    assert wait_file(out, "hello").count("hello slurm cpus=9") == 3


def test_explain_and_dry_run_submit_nothing_and_explain_matches_the_hook(
        sbatch, slurm_cli, slurm_cluster, tmp_path, profiles_path):
    cfg = tmp_path / "synergy.toml"
    cfg.write_text(slurm_section(slurm_cluster) + f'[hook]\ndir = "{slurm_cluster.etc}"\n'
                   f'state_dir = "{slurm_cluster.etc}"\n'
                   f'[profiles]\nfile = "{profiles_path}"\n'
                   f'store = "{tmp_path / "none.db"}"\n')
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\n#SBATCH --gpus=2\n#SBATCH --comment=vision\nrun\n")
    res = sbatch("--explain", "--format", "json", "--config", str(cfg), "--profile-key",
                 "res18", str(script), "--gpus", "7")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["hook"]["managed"] is True and info["hook"]["cpus_per_gpu"] == 9
    assert info["controller"]["ideal_cpus_per_gpu"] == 9
    text = sbatch("--explain", "--config", str(cfg), "--gpus=1", str(script))
    assert text.returncode == 0 and "held until the controller" in text.stdout
    dry = sbatch("--dry-run", "--profile-key", "res18", str(script))
    assert dry.returncode == 0
    assert dry.stdout.strip().endswith(
        f"sbatch '--comment=vision synergy:profile=res18' {script}")
    assert queued(slurm_cli) == []
    # What explain said is what the real hook does with the same job.
    res = sbatch("--parsable", "--profile-key", "res18", "-o", "/dev/null", str(script))
    f = fields(slurm_cli, int(res.stdout.strip()))
    assert per_gpu(f, "CpusPerTres") == 9 and f["Comment"] == "vision synergy:profile=res18"
    assert gpu_count(f.get("TresPerJob", "")) == (2, None)


@pytest.mark.parametrize("args, code, message", [
    (["--template", "nosuch"], 2, "no template 'nosuch'"),
    (["--template", "pytorch-single"], 2, "needs --var DATA"),
    (["--template", "pytorch-single", "--var", "DATA=/d", "--var", "STEPS=many"], 2,
     "expected a whole number"),
    (["--template", "pytorch-single", "--var", "DATA=/d; rm -rf /"], 2, "DATA"),
    (["--template", "pytorch-single", "--var", "DATA=/d", "SCRIPT"], 2,
     "either --template or a script"),
    (["--var", "DATA=/d", "SCRIPT"], 2, "--var needs --template"),
    (["--dataset-size", "lots", "SCRIPT"], 2, "expected a size like 120G"),
    (["--dataset-size", "-5G", "SCRIPT"], 2, "expected a size"),
    (["--no-synergy", "--profile-key", "res18", "SCRIPT"], 2, "cannot be combined"),
    (["--requeue-ok", "--no-requeue", "SCRIPT"], 2, "conflicts with --no-requeue"),
    (["--profile-key", "../etc/passwd", "SCRIPT"], 2, "--profile-key"),
    (["--format", "yaml", "--explain", "SCRIPT"], 2, "'yaml' is not one of"),
    (["--gpus=1", "--partition=nosuch", "SCRIPT"], 1, "invalid partition"),
])
def test_bad_input_is_refused_clearly_and_submits_nothing(sbatch, slurm_cli, tmp_path,
                                                          args, code, message):
    script = tmp_path / "train.sh"
    script.write_text(REPORT)
    res = sbatch(*[str(script) if a == "SCRIPT" else a for a in args])
    assert res.returncode == code, (res.stdout, res.stderr)
    assert message in res.stderr and "Traceback" not in res.stderr
    assert queued(slurm_cli) == []
