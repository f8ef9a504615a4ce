"""The emulator's core burners: what accounting records is the share a job was told to use."""

from __future__ import annotations

import os
import signal
import time

import psutil

from synergy_slurm.emulate import _burner


def _cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def test_a_burner_uses_its_share_of_a_core() -> None:
    pid = _burner(0.4)
    try:
        time.sleep(1.5)
        used = _cpu_s(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert 0.4 * 1.5 * 0.7 < used < 0.4 * 1.5 * 1.3


def test_a_burner_kept_off_its_core_makes_up_for_it() -> None:
    """Stopped for a second (what a busy host does to a nice-19 process), it owes that
    second's share and spins until it has paid it: over the run it used its share."""
    pid = _burner(0.3)
    try:
        time.sleep(0.3)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(1.0)
        os.kill(pid, signal.SIGCONT)
        time.sleep(1.2)
        used = _cpu_s(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    # 2.5 s of wall: 0.75 s owed; a burner that does not make up for the stop used
    # about 0.3 x 1.5 = 0.45 s.
    assert used > 0.65, used
    assert used < 0.9, used
