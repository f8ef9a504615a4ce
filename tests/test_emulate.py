"""The emulator's core burners: what accounting records is the share a job was told to use.
The burners run at nice 0 here (the emulated jobs' run at 19, below Slurm's daemons), so
that whatever else this host runs takes no more from them than from any program."""

from __future__ import annotations

import os
import signal
import time

import psutil

from synergy_slurm.emulate import _burner


def _cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def _run(share: float, plan: list[tuple[str, float]], **kw) -> float:
    """CPU seconds a burner used over ``plan``: (``run`` or ``stop``, seconds) steps."""
    pid = _burner(share, nice=0, **kw)
    try:
        for what, seconds in plan:
            if what == "stop":
                os.kill(pid, signal.SIGSTOP)
            time.sleep(seconds)
            if what == "stop":
                os.kill(pid, signal.SIGCONT)
        return _cpu_s(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_burner_uses_its_share_of_a_core() -> None:
    used = _run(0.4, [("run", 1.5)])
    assert 0.4 * 1.5 * 0.7 < used < 0.4 * 1.5 * 1.3


def test_a_burner_kept_off_its_core_makes_up_for_it() -> None:
    """Stopped for a second (what a busy host does to a nice-19 process), it owes that
    second's share and spins until it has paid it: over the run it used its share. A
    burner that did not make up for the stop used about 0.3 x 1.5 = 0.45 s of 2.5 s."""
    used = _run(0.3, [("run", 0.3), ("stop", 1.0), ("run", 1.2)])
    assert 0.6 < used < 0.9, used


def test_what_a_burner_makes_up_is_capped() -> None:
    """After a long stall it repays at most ``catch_up_s`` of its share, not the stall's."""
    used = _run(0.3, [("run", 0.3), ("stop", 1.5), ("run", 1.2)], catch_up_s=0.5)
    # 0.3 x 1.5 s of running, and 0.3 x 0.5 s made up (not 0.3 x 1.5 s).
    assert 0.45 < used < 0.75, used
