"""Each job template on the real cluster: rendered by synergy-sbatch, submitted with a
CPU-only tiny model, requeued once while it trains, and resumed from its checkpoint."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ..slurm.helpers import cancel_all, wait_for

pytestmark = pytest.mark.slurm
pytest.importorskip("torch", reason="install the torch extra: pip install -e .[torch]")
EXE = Path(sys.executable).parent / "synergy-sbatch"


@pytest.fixture
def work():
    d = Path(tempfile.mkdtemp(prefix="synergy-template-"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def wait_log(path: Path, pattern: str, timeout_s: float = 120) -> str:
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if re.search(pattern, text):
            return text
        time.sleep(0.5)
    raise AssertionError(f"{pattern!r} not in {path}:\n{text}")


@pytest.mark.parametrize("template, ranks", [("pytorch-single", 1),
                                             ("pytorch-torchrun", 2)])
def test_template_checkpoints_on_requeue_and_resumes(template, ranks, slurm_cluster,
                                                     slurm_cli, work):
    cancel_all(slurm_cli)
    log = work / "job.log"
    res = subprocess.run(
        [str(EXE), "--parsable", "--requeue-ok", "--template", template,
         "--var", f"DATA={work}/data", "--var", "SYNTHETIC=64", "--var", "STEPS=300",
         "--var", "BATCH=8", "--var", "STEP_DELAY=0.05", "--var", f"CKPT={work}/ckpt.pt",
         "--var", "TIME=00:05:00", "-o", str(log)],
        capture_output=True, text=True, env=slurm_cli.env(), cwd=work, check=False)
    assert res.returncode == 0, res.stderr
    jid = int(res.stdout.strip())
    fields = slurm_cli.run("scontrol", ["show", "job", "-o", str(jid)])
    assert "Requeue=1" in fields and "synergy:requeue-ok" in fields
    wait_log(log, r"step 100/300")
    slurm_cli.run("scontrol", ["requeue", str(jid)])
    wait_for(slurm_cli, jid, {"COMPLETED"}, timeout_s=300)
    text = log.read_text()
    print(f"\n{template}: " + " | ".join(
        ln for ln in text.splitlines() if re.match(r"(signal|resumed|finished|job )", ln)))
    stopped = [int(m) for m in re.findall(r"checkpointed at step (\d+)", text)]
    resumed = [int(m) for m in re.findall(r"resumed from step (\d+) \(restart 1\)", text)]
    assert len(resumed) == ranks, text
    # Resumed where it stopped: at the step checkpointed on SIGTERM, else (a rank killed
    # before it could) at the last periodic checkpoint; never from scratch.
    assert 100 <= resumed[0] < 300
    if stopped:
        assert resumed[0] == max(stopped)
    assert text.count("finished at step 300") == ranks
    assert f"job {jid} restart 1" in text
    assert not (work / "ckpt.pt.tmp").exists()
