"""The PyTorch template's own life cycle, outside Slurm: it finishes, resumes from its
checkpoint, and checkpoints and exits 0 on SIGUSR1 (what a requeue sends first).

Each run has a deadline: a template that never exits (a data-loader worker left to
interpreter shutdown hung it once) holds a GPU node until its time limit.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="install the torch extra: pip install -e .[torch]")
TRAIN = Path(__file__).resolve().parents[2] / "sbatch_templates" / "train_pytorch.py"
DEADLINE_S = 120


def _train(data: Path, ck: Path, *extra: str) -> list[str]:
    return [sys.executable, str(TRAIN), "--data", str(data), "--batch-size", "8",
            "--checkpoint", str(ck), "--checkpoint-every", "5", "--log-every", "4",
            "--workers", "1", *extra]


def test_finishes_then_resumes_from_its_checkpoint(tmp_path):
    data, ck = tmp_path / "jpegs", tmp_path / "ck.pt"
    first = subprocess.run(_train(data, ck, "--synthetic", "32", "--steps", "6"),
                           capture_output=True, text=True, timeout=DEADLINE_S)
    assert first.returncode == 0, first.stderr
    assert "starting at step 0" in first.stdout and "finished at step 6" in first.stdout
    again = subprocess.run(_train(data, ck, "--steps", "9"), capture_output=True, text=True,
                           timeout=DEADLINE_S)
    assert again.returncode == 0, again.stderr
    assert "resumed from step 6" in again.stdout and "finished at step 9" in again.stdout


def test_sigusr1_checkpoints_and_exits_zero(tmp_path):
    data, ck = tmp_path / "jpegs", tmp_path / "ck.pt"
    proc = subprocess.Popen(_train(data, ck, "--synthetic", "32", "--steps", "100000",
                                   "--step-delay", "0.05"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + DEADLINE_S
        for line in proc.stdout:
            if line.startswith("step ") or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGUSR1)
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "signal 10: checkpointed at step" in out
    assert ck.exists()
